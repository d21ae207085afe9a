// shepherd dashboard: the live parts of a page, and confirmations. No build step, no library.
//
// An element with data-live="URL" listens to the server-sent events at URL; each
// `refresh` event carries the element's new HTML, rendered (and escaped) by the server.
// EventSource reconnects on its own after a network error.
"use strict";

function follow(region) {
  const source = new EventSource(region.dataset.live);
  source.addEventListener("refresh", (event) => {
    region.innerHTML = event.data;
    region.dataset.refreshed = String(Number(region.dataset.refreshed || 0) + 1);
  });
  source.addEventListener("error", () => {
    region.classList.toggle("stale", source.readyState !== EventSource.OPEN);
  });
  source.addEventListener("open", () => region.classList.remove("stale"));
}

// A button with data-confirm="question" submits its form only once confirmed.
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-confirm]");
  if (button && !window.confirm(button.dataset.confirm)) {
    event.preventDefault();
  }
});

// The retry form: choosing a step puts that step's payload (its option's data-payload) in the box.
document.addEventListener("change", (event) => {
  const select = event.target.closest("form.retry select[name=seq]");
  const box = select && select.form.querySelector("textarea[name=payload]");
  if (box && select.selectedOptions.length) {
    box.value = select.selectedOptions[0].dataset.payload || "";
  }
});

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-live]").forEach(follow);
});
