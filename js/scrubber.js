// StepScrubber: a slider over the recorded steps, play/pause, back/forward
// buttons, arrow keys (Home/End, space to play), and the scalars at the step.
import { el, on } from "./lib/dom.js";
import { formatNumber, formatStep } from "./lib/format.js";
import { listen, save } from "./lib/model.js";
import { throttle } from "./lib/schedule.js";
import { guard, present, viewState } from "./lib/state.js";
import { stepRuns } from "./lib/steps.js";
import { decodeArray } from "./lib/wire.js";

/** @param {{model: import("./lib/model.js").AnyModel, el: HTMLElement}} ctx */
function render({ model, el: root }) {
  root.classList.add("nbviz", "nbviz-scrubber");
  root.setAttribute("tabindex", "0");
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  root.setAttribute("aria-label", "step scrubber: arrow keys move, space plays");

  const button = (/** @type {string} */ cls, /** @type {string} */ text, /** @type {string} */ title) =>
    el("button", { class: ["nbviz-button", cls], text, attrs: { type: "button", title, "aria-label": title } });
  const first = button("nbviz-scrub-first", "|\u25c0", "first step");
  const back = button("nbviz-scrub-back", "\u25c0", "previous step (left arrow)");
  const play = button("nbviz-scrub-play", "play", "play (space)");
  const forward = button("nbviz-scrub-forward", "\u25b6", "next step (right arrow)");
  const last = button("nbviz-scrub-last", "\u25b6|", "last step");
  const slider = /** @type {HTMLInputElement} */ (
    el("input", { class: "nbviz-scrub-slider", attrs: { type: "range", min: 0, max: 0, step: 1, "aria-label": "step" } })
  );
  const label = el("span", { class: "nbviz-scrub-step" });
  const scalars = el("div", { class: "nbviz-scrub-scalars" });
  const body = el("div", { class: "nbviz-scrub-body" }, [
    el("div", { class: "nbviz-scrub-row" }, [first, back, play, forward, last, slider, label]),
    scalars,
  ]);

  // the recorded steps as arithmetic runs (a run logged every step is one), indexed lazily
  let positions = stepRuns([]);
  // every k-th recorded step is a position when an irregular run has too many to send
  let every = 1;
  let total = 0;
  /** @type {ReturnType<typeof setInterval> | null} */
  let timer = null;

  const decodePositions = () => {
    const p = model.get("positions");
    positions = stepRuns(p && p.runs ? decodeArray(p.runs).data : []);
    every = Math.max(1, Number(p?.every) || 1);
    total = Number(p?.total) || positions.length;
    slider.max = String(Math.max(0, positions.length - 1));
  };

  // The step a move asked for, until it is sent: the kernel's echo of an earlier send may
  // arrive in between (fast key presses, a busy kernel) and must not undo it, nor be the
  // base of the next move.
  /** @type {number | null} */
  let pending = null;
  const sendStep = throttle((/** @type {number} */ step) => {
    pending = null;
    save(model, { step });
  }, 80);

  const goTo = (/** @type {number} */ index) => {
    if (positions.length === 0) return;
    const step = positions.at(Math.min(Math.max(index, 0), positions.length - 1));
    pending = step;
    model.set("step", step);
    draw();
    sendStep(step);
  };
  const currentStep = () => pending ?? Number(model.get("step"));
  const currentIndex = () => positions.snap(currentStep());

  const draw = guard(root, "Drawing the step scrubber", () => {
    if (!present(root, body, viewState(model, positions.length === 0 && "No steps recorded yet."))) return;
    const step = currentStep();
    const i = currentIndex();
    slider.value = String(i);
    const shown = positions.at(i);
    // "after Y" says the step is not recorded, which only every position sent can tell;
    // thinned positions (every > 1) may skip a recorded step: say where it is shown
    const where = every > 1 || shown > step ? "shown at" : "after";
    const of = every > 1 ? ` (1 in ${formatStep(every)} of ${formatStep(total)} steps)` : "";
    label.textContent =
      `step ${formatStep(step)}` +
      (shown === step ? "" : ` (${where} ${formatStep(shown)})`) +
      ` \u00b7 ${formatStep(i + 1)} of ${formatStep(positions.length)}${of}`;
    root.setAttribute("data-step", String(step));
    const playing = !!model.get("playing");
    play.textContent = playing ? "pause" : "play";
    play.setAttribute("title", playing ? "pause" : "play");
    play.setAttribute("aria-label", playing ? "pause" : "play");
    back.disabled = first.disabled = i <= 0;
    forward.disabled = last.disabled = i >= positions.length - 1;
    drawScalars();
  });

  const drawScalars = () => {
    const at = model.get("scalars_at") ?? {};
    const names = at.names ?? [];
    if (!names.length) {
      scalars.replaceChildren(el("span", { class: "nbviz-muted", text: "no scalars logged at or before this step" }));
      return;
    }
    const steps = decodeArray(at.steps).data;
    const values = decodeArray(at.values).data;
    const step = Number(model.get("step"));
    const items = names.map((/** @type {string} */ name, /** @type {number} */ k) =>
      el("span", { class: "nbviz-scrub-scalar", attrs: { "data-name": name } }, [
        el("b", { text: name }),
        ` ${formatNumber(values[k])}`,
        steps[k] !== step ? el("span", { class: "nbviz-muted", text: ` (step ${formatStep(steps[k])})` }) : null,
      ]),
    );
    const parts = [];
    items.forEach((node, k) => {
      if (k) parts.push(" \u00b7 ");
      parts.push(node);
    });
    scalars.replaceChildren(...parts);
  };

  const stopTimer = () => {
    if (timer !== null) clearInterval(timer);
    timer = null;
  };
  const syncTimer = () => {
    stopTimer();
    if (!model.get("playing")) return;
    const fps = Math.min(60, Math.max(0.1, Number(model.get("fps")) || 4));
    timer = setInterval(() => {
      const i = currentIndex();
      if (i >= positions.length - 1) {
        stopTimer();
        sendStep.flush();
        save(model, { playing: false });
        return;
      }
      goTo(i + Math.max(1, Number(model.get("stride")) || 1));
    }, 1000 / fps);
  };
  const togglePlay = () => {
    const playing = !model.get("playing");
    if (playing && currentIndex() >= positions.length - 1) goTo(0);
    save(model, { playing });
  };

  /** @type {Array<[EventTarget, string, (e: any) => void]>} */
  const handlers = [
    [first, "click", () => goTo(0)],
    [back, "click", () => goTo(currentIndex() - 1)],
    [forward, "click", () => goTo(currentIndex() + 1)],
    [last, "click", () => goTo(positions.length - 1)],
    [play, "click", togglePlay],
    [slider, "input", () => goTo(Number(slider.value))],
    [
      root,
      "keydown",
      (/** @type {KeyboardEvent} */ e) => {
        if (e.target instanceof HTMLInputElement && e.target !== slider) return;
        const moves = { ArrowLeft: -1, ArrowDown: -1, ArrowRight: 1, ArrowUp: 1, PageDown: -10, PageUp: 10 };
        if (e.key in moves) goTo(currentIndex() + moves[/** @type {keyof typeof moves} */ (e.key)]);
        else if (e.key === "Home") goTo(0);
        else if (e.key === "End") goTo(positions.length - 1);
        else if (e.key === " ") togglePlay();
        else return;
        e.preventDefault();
        e.stopPropagation();
      },
    ],
  ];
  const unbind = handlers.map(([target, type, fn]) => on(target, type, fn));

  decodePositions();
  draw();
  syncTimer();
  const stops = [
    listen(model, ["positions"], () => {
      decodePositions();
      draw();
    }),
    listen(model, ["step", "scalars_at", "empty", "error"], draw),
    listen(model, ["playing", "fps"], () => {
      syncTimer();
      draw();
    }),
  ];
  return () => {
    for (const stop of stops) stop();
    for (const off of unbind) off();
    stopTimer();
    sendStep.flush();
  };
}

export default { render };
