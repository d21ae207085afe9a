"""`shepherd demo`: the seed's e-commerce example, runnable with no set-up.

Five hundred orders go through reserve stock -> charge payment -> create shipment
against simulated services that fail, stall, hang and decline cards; shepherd
brings every order to an end. `--crash` also kills a worker process mid-run.
"""

from __future__ import annotations

from shepherd.demo.cli import demo

__all__ = ["demo"]
