// Live updates for every dashboard page.
//
// The page renders <body data-live-after="N"> and one <div id="live" data-live-event-id="N">.
// This script listens on /ws/events/ for events newer than N (optionally only one project's or
// one session's), and on every batch re-fetches the page with "X-Live-Fragment: 1", which
// answers with only the #live region's inner HTML, and swaps it in. Text a person is typing
// into a form inside the region survives the swap. No inline handlers: it runs under a strict
// Content-Security-Policy.
(function () {
  "use strict";

  var live = document.getElementById("live");
  if (!live || !window.WebSocket || !window.fetch) {
    return;
  }

  var DEBOUNCE_MS = 50;
  var FIRST_RETRY_MS = 500;
  var MAX_RETRY_MS = 15000;
  var STABLE_MS = 5000; // an open socket that lasted this long resets the back-off
  var CLOSE_LOGGED_OUT = 4401;
  var CLOSE_FORBIDDEN = 4403;
  var CLOSE_BAD_REQUEST = 4400;

  var status = document.getElementById("live-status");
  var newestSeen = toId(document.body.getAttribute("data-live-after"));
  var applied = toId(live.getAttribute("data-live-event-id"));
  if (applied > newestSeen) {
    newestSeen = applied;
  }
  var retryMs = FIRST_RETRY_MS;
  var debounceTimer = null;
  var lastRefreshAt = 0;
  var fetching = false;
  var refetch = false;
  var pointerHeld = false;
  var heldSwap = null;

  function toId(value) {
    var n = parseInt(value || "0", 10);
    return isNaN(n) ? 0 : n;
  }

  function setStatus(state, text) {
    if (status) {
      status.setAttribute("data-state", state);
      status.textContent = text;
    }
  }

  function socketUrl() {
    var params = new URLSearchParams();
    params.set("after", String(newestSeen));
    var project = live.getAttribute("data-live-project");
    var session = live.getAttribute("data-live-session");
    if (project) {
      params.set("project", project);
    }
    if (session) {
      params.set("session", session);
    }
    var scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    return scheme + "//" + window.location.host + "/ws/events/?" + params.toString();
  }

  function connect() {
    var socket;
    var openedAt = 0;
    try {
      socket = new WebSocket(socketUrl());
    } catch (err) {
      retryLater();
      return;
    }
    socket.addEventListener("open", function () {
      openedAt = Date.now();
      setStatus("live", "live");
    });
    socket.addEventListener("message", function (message) {
      var data;
      try {
        data = JSON.parse(message.data);
      } catch (err) {
        return;
      }
      if (!data || data.type !== "events" || !Array.isArray(data.events)) {
        return;
      }
      // The server never sends an event twice, so every one is news, even one whose id is
      // below the newest seen (PostgreSQL may commit a lower id after a higher one).
      var grew = false;
      data.events.forEach(function (event) {
        if (event && typeof event.id === "number") {
          newestSeen = Math.max(newestSeen, event.id);
          grew = true;
        }
      });
      if (grew) {
        retryMs = FIRST_RETRY_MS;
        schedule();
      }
    });
    socket.addEventListener("close", function (event) {
      if (event.code === CLOSE_FORBIDDEN || event.code === CLOSE_LOGGED_OUT) {
        // Logged out or not allowed to watch: retrying cannot help; a reload shows why.
        setStatus("denied", "not live: reload the page");
        return;
      }
      if (event.code === CLOSE_BAD_REQUEST) {
        setStatus("error", "not live");
        return;
      }
      if (openedAt && Date.now() - openedAt >= STABLE_MS) {
        retryMs = FIRST_RETRY_MS;
      }
      retryLater();
    });
  }

  function retryLater() {
    setStatus("reconnecting", "reconnecting");
    // Jitter keeps many open tabs from reconnecting in lockstep after a server restart.
    var delay = retryMs + Math.floor(Math.random() * retryMs * 0.2);
    retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
    window.setTimeout(connect, delay);
  }

  // Leading edge: the first event after a quiet spell refreshes at once (that is the latency
  // people see); events right after it wait out DEBOUNCE_MS and share one refresh.
  function schedule() {
    if (debounceTimer !== null) {
      return;
    }
    var wait = lastRefreshAt + DEBOUNCE_MS - Date.now();
    if (wait <= 0 && !fetching) {
      refresh();
      return;
    }
    debounceTimer = window.setTimeout(function () {
      debounceTimer = null;
      refresh();
    }, Math.max(wait, 0));
  }

  function refresh() {
    if (fetching) {
      refetch = true;
      return;
    }
    fetching = true;
    lastRefreshAt = Date.now();
    var target = newestSeen;
    window
      .fetch(window.location.href, {
        headers: { "X-Live-Fragment": "1" },
        credentials: "same-origin",
        cache: "no-store",
      })
      .then(function (response) {
        if (response.redirected) {
          // The login page answered instead: show it for real.
          window.location.reload();
          return null;
        }
        if (!response.ok || response.headers.get("X-Live-Fragment") !== "1") {
          return null;
        }
        return response.text();
      })
      .then(function (html) {
        if (html !== null && html !== undefined) {
          swap(html, target);
        }
      })
      .catch(function () {
        // A network hiccup: the next event, or the replay after reconnecting, refreshes.
      })
      .then(function () {
        fetching = false;
        if (refetch) {
          refetch = false;
          schedule();
        }
      });
  }

  function swap(html, target) {
    if (pointerHeld) {
      // Replacing a button between mouse-down and mouse-up would swallow the click.
      heldSwap = { html: html, target: target };
      return;
    }
    var kept = fieldState();
    live.innerHTML = html;
    restore(kept);
    markApplied(target);
  }

  function markApplied(target) {
    if (target > applied) {
      applied = target;
    }
    live.setAttribute("data-live-event-id", String(applied));
    window.__deepworkLive = { eventId: applied, appliedAt: Date.now() };
    document.dispatchEvent(new CustomEvent("deepwork:live", { detail: window.__deepworkLive }));
  }

  function changed(el) {
    if (el.type === "checkbox" || el.type === "radio") {
      return el.checked !== el.defaultChecked;
    }
    if (el.tagName === "SELECT") {
      return Array.prototype.some.call(el.options, function (option) {
        return option.selected !== option.defaultSelected;
      });
    }
    return el.value !== el.defaultValue;
  }

  // What the person did inside the region: edited fields, focus and caret, by element id.
  function fieldState() {
    var active = document.activeElement;
    var kept = { fields: [], focusId: null };
    if (active && active.id && live.contains(active)) {
      kept.focusId = active.id;
    }
    live.querySelectorAll("input[id], textarea[id], select[id]").forEach(function (el) {
      if (el.type === "hidden" || (el !== active && !changed(el))) {
        return;
      }
      var state = { id: el.id, value: el.value, checked: el.checked, start: null, end: null };
      try {
        state.start = el.selectionStart;
        state.end = el.selectionEnd;
      } catch (err) {
        // Not a text field.
      }
      kept.fields.push(state);
    });
    return kept;
  }

  function restore(kept) {
    kept.fields.forEach(function (state) {
      var el = document.getElementById(state.id);
      if (!el || !live.contains(el)) {
        return;
      }
      if (el.type === "checkbox" || el.type === "radio") {
        el.checked = state.checked;
      } else if (el.tagName === "SELECT") {
        var exists = Array.prototype.some.call(el.options, function (option) {
          return option.value === state.value;
        });
        if (exists) {
          el.value = state.value;
        }
      } else {
        el.value = state.value;
      }
    });
    if (kept.focusId) {
      var focused = document.getElementById(kept.focusId);
      if (focused && live.contains(focused)) {
        focused.focus({ preventScroll: true });
        kept.fields.forEach(function (state) {
          if (state.id === kept.focusId && state.start !== null) {
            try {
              focused.setSelectionRange(state.start, state.end);
            } catch (err) {
              // Not a text field.
            }
          }
        });
      }
    }
  }

  live.addEventListener("pointerdown", function () {
    pointerHeld = true;
  });
  function release() {
    if (!pointerHeld) {
      return;
    }
    pointerHeld = false;
    if (heldSwap) {
      var pending = heldSwap;
      heldSwap = null;
      // After the click event that follows this pointerup has run.
      window.setTimeout(function () {
        swap(pending.html, pending.target);
      }, 0);
    }
  }
  document.addEventListener("pointerup", release);
  document.addEventListener("pointercancel", release);

  window.__deepworkLive = { eventId: applied, appliedAt: null };
  connect();
})();
