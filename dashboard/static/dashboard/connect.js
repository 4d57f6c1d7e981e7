// Copy buttons of the Connect page: each copies the text of the <pre> its data-copy names.
// The buttons are hidden until this script shows them, so a page without it (or without a
// clipboard) offers none that cannot work. No inline handlers: the page runs under a strict
// Content-Security-Policy.
(function () {
  "use strict";

  if (!navigator.clipboard || !navigator.clipboard.writeText) {
    return;
  }
  var buttons = document.querySelectorAll("button.copy[data-copy]");
  Array.prototype.forEach.call(buttons, function (button) {
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) {
      return;
    }
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(source.textContent).then(
        function () {
          button.textContent = "Copied";
        },
        function () {
          button.textContent = "Select and copy by hand";
        }
      );
    });
  });
})();
