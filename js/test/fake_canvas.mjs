// A 2d canvas stand-in for node tests of the drawing pieces: it records what is
// filled, with the colour it was filled in, and draws nothing.

/**
 * A canvas whose context records each filled rectangle (in `rects`, and in
 * `marks` as kind "rect") and each arc (in `marks` as kind "dot").
 */
export function recordingCanvas() {
  const marks = [];
  const rects = [];
  const ctx = {
    fillStyle: "",
    strokeStyle: "",
    lineWidth: 1,
    setTransform() {},
    clearRect() {},
    beginPath() {},
    moveTo() {},
    lineTo() {},
    stroke() {},
    fill() {},
    save() {},
    restore() {},
    rect() {},
    clip() {},
    closePath() {},
    setLineDash() {},
    fillText() {},
    arc: (x, y) => marks.push({ kind: "dot", color: ctx.fillStyle, x, y }),
    fillRect: (x, y, w, h) => {
      const rect = { kind: "rect", color: ctx.fillStyle, x, y, w, h };
      marks.push(rect);
      rects.push(rect);
    },
  };
  return { marks, rects, canvas: { width: 0, height: 0, style: {}, getContext: () => ctx } };
}
