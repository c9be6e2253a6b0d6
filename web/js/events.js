// events.js: a job's server-sent events (GET /v1/jobs/{id}/events) read through fetch(), so
// that the request carries the key this tab holds (EventSource sends no headers, and a private
// job's stream answers 404 without its owner's key). It parses the text/event-stream lines,
// hands each event ({id, event, data}: data as text) to onEvent, and after a dropped
// connection asks again from the last id (Last-Event-ID) until close() is called. A refusal
// (an HTTP error) or a stream that ends by itself goes to onEnd(status), status 0 for the end.
import { fetchWithKey } from "./api.js";

const RETRY_MS = [1000, 2000, 5000];

// Feeds text into the parser state st ({buf, ev}); calls emit for each complete event.
function parse(st, text, emit) {
  st.buf += text;
  let nl;
  while ((nl = st.buf.indexOf("\n")) >= 0) {
    let line = st.buf.slice(0, nl);
    st.buf = st.buf.slice(nl + 1);
    if (line.endsWith("\r")) line = line.slice(0, -1);
    if (line === "") {
      if (st.ev.data !== undefined) emit(st.ev);
      st.ev = {};
    } else if (!line.startsWith(":")) {
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? "" : line.slice(i + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") st.ev.data = st.ev.data === undefined ? value : `${st.ev.data}\n${value}`;
      else if (field === "id" || field === "event") st.ev[field] = value;
    }
  }
}

export function followEvents(path, onEvent, onEnd) {
  let stopped = false;
  let last = null;
  let abort = null;

  // One connection: resolves with the HTTP status of a refusal, or 0 when the stream ended.
  async function connect() {
    const ac = new AbortController();
    abort = () => ac.abort();
    const headers = { Accept: "text/event-stream" };
    if (last !== null) headers["Last-Event-ID"] = String(last);
    const resp = await fetchWithKey(path, { headers, signal: ac.signal });
    if (!resp.ok || !resp.body) return resp.status || -1;
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    const st = { buf: "", ev: {} };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return 0;
      parse(st, value, (ev) => {
        if (ev.id !== undefined) last = ev.id;
        if (!stopped) onEvent(ev);
      });
    }
  }

  (async () => {
    for (let tries = 0; !stopped; tries++) {
      let status = null;
      try {
        status = await connect();
      } catch {
        status = null; // the connection dropped (or close() aborted it)
      }
      if (stopped) return;
      if (status !== null) {
        onEnd(status);
        return;
      }
      await new Promise((ok) => setTimeout(ok, RETRY_MS[Math.min(tries, RETRY_MS.length - 1)]));
    }
  })();

  return {
    close() {
      stopped = true;
      if (abort) abort();
    },
  };
}
