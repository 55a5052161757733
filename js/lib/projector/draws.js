// One scatterplot draw at a time. regl-scatterplot refuses a draw made while the
// previous one is still running (it rejects with "Ignoring draw call as the
// previous draw call has not yet finished"); a view redraws whenever a trait
// changes, so draws are queued here: one runs, the latest request waits, and
// requests made in between are dropped (only the newest state matters).

/**
 * @param {(err: unknown) => void} onError  a draw failed (not called once closed)
 * @returns {{request: (draw: () => Promise<unknown>) => void, close: () => void, busy: () => boolean}}
 */
export function serialDraws(onError) {
  /** @type {(() => Promise<unknown>) | null} */
  let waiting = null;
  let running = false;
  let closed = false;

  const next = () => {
    const draw = waiting;
    waiting = null;
    if (!draw || closed) {
      running = false;
      return;
    }
    running = true;
    let done;
    try {
      done = Promise.resolve(draw());
    } catch (err) {
      done = Promise.reject(err);
    }
    done.catch((err) => {
      if (!closed) onError(err);
    }).finally(next);
  };

  return {
    request(draw) {
      waiting = draw;
      if (!running) next();
    },
    close() {
      closed = true;
      waiting = null;
    },
    busy: () => running,
  };
}
