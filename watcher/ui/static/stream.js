// Live updates from GET /v1/events (Server-Sent Events). EventSource cannot send an
// Authorization header, so the stream is read with fetch(): frames are parsed here, and a
// reconnect resumes after the last id seen (Last-Event-ID). The server ends each stream
// after a while on purpose; only a failed or refused connection counts as disconnected.

import { authHeaders, get } from "./api.js";

export class LiveStream {
  constructor(onEvent, onState) {
    this.onEvent = onEvent;
    this.onState = onState;
    this.lastId = null;
    this.retryMs = 1000;
    this.controller = null;
    this.stopped = false;
  }

  async start() {
    this.stopped = false;
    if (this.lastId === null) {
      try {
        this.lastId = (await get("/v1/events/latest")).last_event_id;
      } catch (e) {
        this.onState("disconnected", e.message);
        this.later();
        return;
      }
    }
    this.connect();
  }

  stop() {
    this.stopped = true;
    if (this.controller) this.controller.abort();
  }

  restart() {
    this.stop();
    this.lastId = null;
    this.start();
  }

  later() {
    if (!this.stopped) setTimeout(() => this.start(), this.retryMs);
  }

  async connect() {
    this.controller = new AbortController();
    const headers = authHeaders({ Accept: "text/event-stream" });
    if (this.lastId !== null) headers["Last-Event-ID"] = String(this.lastId);
    let failed = null;
    try {
      const response = await fetch("/v1/events", { headers, signal: this.controller.signal, cache: "no-store" });
      if (!response.ok || !response.body) {
        failed = `the stream was refused (HTTP ${response.status})`;
      } else {
        this.onState("live");
        await this.read(response.body.getReader());
      }
    } catch (e) {
      if (this.stopped) return;
      failed = e.message || "the connection failed";
    }
    if (this.stopped) return;
    if (failed !== null) {
      this.onState("disconnected", failed);
      setTimeout(() => this.connect(), this.retryMs);
    } else {
      this.connect(); // the server closed a healthy stream: resume at once
    }
  }

  async read(reader) {
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        this.frame(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
      }
    }
  }

  frame(text) {
    let id = null, kind = "message", data = "";
    for (const line of text.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "event") kind = value;
      else if (field === "data") data += (data ? "\n" : "") + value;
      else if (field === "retry" && /^\d+$/.test(value)) this.retryMs = Number(value);
    }
    if (id !== null && /^\d+$/.test(id)) this.lastId = Number(id);
    if (!data) return;
    let event;
    try { event = JSON.parse(data); } catch { return; }
    this.onEvent(kind, event);
  }
}
