// Behaviour every page shares, kept out of the templates so the Content-Security-Policy can forbid
// inline script: confirmations before destructive forms, the team switcher, the share bars.
(function () {
  // <form data-confirm="Delete this?">: ask first; a "Cancel" stops the submit.
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      ev.preventDefault();
      ev.stopImmediatePropagation();
    }
  }, true);

  // <select data-navigate>: each option's value is the page to open.
  document.addEventListener("change", function (ev) {
    var select = ev.target;
    if (select instanceof HTMLSelectElement && select.hasAttribute("data-navigate") && select.value) {
      window.location.href = select.value;
    }
  });

  // <span class="bar" data-w="12.5">: the bar's length, set through the CSSOM (a style attribute
  // in the markup would be refused by the policy).
  function bars(root) {
    root.querySelectorAll(".bar[data-w]").forEach(function (el) {
      el.style.setProperty("--w", el.dataset.w);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { bars(document); });
  document.addEventListener("htmx:afterSettle", function (ev) { bars(ev.target || document); });
})();
