"""Store operations written once for both backends: one SQL text, one plan, two dialects.

`dialect` says how the two backends' SQL differs (placeholders, typed
parameters, lists, time types); `plan` is how an operation is written as a
generator of statements that either backend runs. Each other module holds one
topic's statements and plans; the backend's module of the same name files
them as its handlers and keeps only what truly differs there (claiming, array
batching, wake-ups, time types).
"""
