// The captioning page: the microphone, through an AudioWorklet, to the server's sherpa-onnx
// WebSocket (/sherpa, float32 samples at the capture rate, "Done" at the end); its results
// shown as they come: the open utterance's partial line, each final with its times.
//
// A browser's WebSocket does not tell why a handshake failed, so the page asks the server
// first (GET /admission, same query) and again after a failed handshake, and says what
// went wrong: server unreachable, full (503), token needed (401), bad options (400).

import { finalOf, partialParts, shortClock, srt, txt } from "./subtitles.js";

const BLOCK_SECONDS = 0.05; // audio per WebSocket message
// query parameters of this page's address that are passed on to the server
const SERVER_OPTIONS = ["token", "search", "beam", "hotwords", "phrases", "text_format",
  ...[1, 2, 3].flatMap((n) => [`rule${n}_min_trailing_silence`, `rule${n}_min_utterance_length`])];
// finals for people (punctuation, casing, written numbers) unless the page's address says
// otherwise (?text_format=raw or punct)
const DEFAULT_TEXT_FORMAT = "full";

const $ = (id) => document.getElementById(id);
const ui = {
  toggle: $("toggle"), status: $("status"), message: $("message"), finals: $("finals"),
  partial: $("partial"), hint: $("hint"), captions: $("captions"), large: $("large"),
  txt: $("download-txt"), srt: $("download-srt"), clear: $("clear"),
};

const STATES = {
  idle: "Idle", connecting: "Connecting…", listening: "Listening", finishing: "Finishing…",
  stopped: "Stopped", error: "Not connected",
};

const finals = []; // {segment, text, words: [{text, start, end}]}, times from the first start
let session = null; // the running capture, or null
let audioSeconds = 0; // audio sent in the sessions before this one: the next one's time offset
let startedAt = null; // when the first session started (for download names)

// -- what the page shows -------------------------------------------------------------------
function setState(state) {
  ui.status.dataset.state = state;
  ui.status.textContent = STATES[state];
  const running = state === "connecting" || state === "listening" || state === "finishing";
  ui.toggle.textContent = state === "listening" || state === "finishing" ? "Stop" : "Start";
  ui.toggle.disabled = state === "connecting" || state === "finishing";
  ui.clear.disabled = running || finals.length === 0;
}

function showMessage(text) {
  ui.message.textContent = text;
  ui.message.hidden = !text;
}

function followBottom(update) {
  const atBottom = ui.captions.scrollHeight - ui.captions.scrollTop - ui.captions.clientHeight < 40;
  update();
  if (atBottom) ui.captions.scrollTop = ui.captions.scrollHeight;
}

// The open utterance: its stable part steady, the rest (which may still change) lighter.
function showPartial(segment, message) {
  followBottom(() => {
    ui.partial.dataset.segment = segment;
    const [stable, unstable] = message ? partialParts(message) : ["", ""];
    const steady = document.createElement("span");
    steady.className = "stable";
    steady.textContent = stable;
    const moving = document.createElement("span");
    moving.className = "unstable";
    moving.textContent = unstable;
    ui.partial.replaceChildren(steady, moving);
  });
}

function addFinal(final) {
  finals.push(final);
  followBottom(() => {
    const item = document.createElement("li");
    item.dataset.segment = final.segment;
    const time = document.createElement("span");
    time.className = "time";
    const words = final.words;
    time.textContent = words.length
      ? `[${shortClock(words[0].start)} - ${shortClock(words[words.length - 1].end)}]` : "";
    const text = document.createElement("span");
    text.className = "text";
    text.textContent = final.text;
    item.append(time, " ", text);
    ui.finals.append(item);
    ui.partial.textContent = "";
  });
  ui.hint.hidden = true;
  ui.txt.disabled = ui.srt.disabled = false;
}

// -- the server ----------------------------------------------------------------------------
function serverQuery(sampleRate) {
  const query = new URLSearchParams();
  const page = new URLSearchParams(location.search);
  for (const name of SERVER_OPTIONS) for (const v of page.getAll(name)) query.append(name, v);
  query.set("sample_rate", String(sampleRate));
  if (!query.has("text_format")) query.set("text_format", DEFAULT_TEXT_FORMAT);
  return query.toString();
}

// What the server says of a connection with this query: {admitted, frame_seconds} or
// {admitted: false, status, reason}; null when it cannot be reached.
async function askAdmission(query) {
  let response;
  try {
    response = await fetch(`/admission?${query}`, { cache: "no-store" });
  } catch (error) {
    return null;
  }
  try {
    return await response.json();
  } catch (error) { // not streamdec's answer (a proxy's error page, say)
    return { admitted: false, status: response.status, reason: response.statusText };
  }
}

function refusalMessage(answer) {
  if (answer === null) {
    return `Cannot reach the server at ${location.host}. Check that streamdec serve is ` +
      "running and reachable from this device, then press Start again.";
  }
  if (answer.status === 503) {
    return `The server cannot take this connection now (${answer.reason}). ` +
      "Try again in a moment.";
  }
  if (answer.status === 401) {
    return "This server needs an access token: open this page as " +
      `${location.origin}/?token=YOUR_TOKEN (${answer.reason}).`;
  }
  return `The server refused the connection (${answer.status}: ${answer.reason}).`;
}

function openSocket(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.binaryType = "arraybuffer";
    ws.onopen = () => resolve(ws);
    ws.onclose = () => reject(new Error("handshake failed"));
  });
}

// -- the microphone ------------------------------------------------------------------------
function microphoneMessage(error) {
  switch (error && error.name) {
    case "NotAllowedError":
    case "SecurityError":
      return "The microphone was refused. Allow this page to use it (the icon in the " +
        "address bar, or the browser's site settings), then press Start again.";
    case "NotFoundError":
    case "OverconstrainedError":
      return "No microphone was found. Connect one, then press Start again.";
    case "NotReadableError":
    case "AbortError":
      return "The microphone could not be opened: another program may be using it.";
    default:
      return `The microphone could not be opened (${error}).`;
  }
}

const INSECURE = "The browser allows the microphone only on a secure page: open this page " +
  "over https (start the server with --tls-cert and --tls-key), or at http://localhost on " +
  "the machine that runs the server.";

async function openMicrophone() {
  const stream = await navigator.mediaDevices.getUserMedia({
    audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false },
  });
  // the context at the microphone's own rate where the browser tells it: no resampling
  // before the server's (some browsers refuse a microphone at another rate than the context)
  const rate = stream.getAudioTracks()[0].getSettings().sampleRate;
  let context;
  try {
    try {
      context = rate ? new AudioContext({ sampleRate: rate }) : new AudioContext();
    } catch (error) {
      context = new AudioContext();
    }
    await context.audioWorklet.addModule("/static/capture-worklet.js");
    await context.resume(); // a context made outside a click may start suspended
  } catch (error) {
    releaseMicrophone({ stream, context });
    throw error;
  }
  return { stream, context };
}

function releaseMicrophone(s) {
  if (s.released) return;
  s.released = true;
  if (s.source) s.source.disconnect();
  for (const track of s.stream.getTracks()) track.stop();
  if (s.context && s.context.state !== "closed") s.context.close();
}

// -- a session: Start to Stop --------------------------------------------------------------
async function start() {
  showMessage("");
  setState("connecting");
  if (!window.isSecureContext || !navigator.mediaDevices) {
    showMessage(INSECURE);
    setState("error");
    return;
  }
  let mic;
  try {
    mic = await openMicrophone();
  } catch (error) {
    showMessage(microphoneMessage(error));
    setState("error");
    return;
  }
  const s = { ...mic, offset: audioSeconds, sent: 0, stopping: false, done: false };
  const query = serverQuery(s.context.sampleRate);
  const answer = await askAdmission(query);
  if (answer === null || !answer.admitted) {
    releaseMicrophone(s);
    showMessage(refusalMessage(answer));
    setState("error");
    return;
  }
  s.frameSeconds = answer.frame_seconds;
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  try {
    s.ws = await openSocket(`${scheme}://${location.host}/sherpa?${query}`);
  } catch (error) {
    releaseMicrophone(s);
    const again = await askAdmission(query); // why: the handshake's status is not shown
    showMessage(again !== null && again.admitted
      ? "The server refused the connection. Press Start to try again." : refusalMessage(again));
    setState("error");
    return;
  }
  session = s;
  startedAt = startedAt || new Date();
  s.ws.onmessage = (event) => onServerMessage(s, event.data);
  s.ws.onclose = (event) => onClosed(s, event);
  s.node = new AudioWorkletNode(s.context, "streamdec-capture", {
    numberOfInputs: 1, numberOfOutputs: 0,
    processorOptions: { blockSize: Math.round(s.context.sampleRate * BLOCK_SECONDS) },
  });
  s.node.port.onmessage = (event) => onAudio(s, event.data);
  s.source = s.context.createMediaStreamSource(s.stream);
  s.source.connect(s.node);
  setState("listening");
}

function onAudio(s, data) {
  const last = !(data instanceof Float32Array);
  const samples = last ? data.flushed : data;
  if (samples.length && !s.inputDone && s.ws.readyState === WebSocket.OPEN) {
    s.ws.send(samples.buffer);
    s.sent += samples.length;
  }
  if (last) endInput(s);
}

// No more audio: "Done" asks the server for the last results, then "Done!".
function endInput(s) {
  if (s.inputDone) return;
  s.inputDone = true;
  clearTimeout(s.flushTimer);
  if (s.ws.readyState === WebSocket.OPEN) s.ws.send("Done");
  releaseMicrophone(s);
}

function stop() {
  const s = session;
  s.stopping = true;
  setState("finishing");
  s.source.disconnect();
  s.node.port.postMessage("flush"); // its answer is the last audio, then "Done"
  s.flushTimer = setTimeout(() => endInput(s), 2000); // should the audio thread not answer
}

function onServerMessage(s, data) {
  if (data === "Done!") {
    s.done = true;
    return;
  }
  const message = JSON.parse(data);
  if (message.error !== undefined) {
    showMessage(`The server ended the session: ${message.error}`);
    return;
  }
  const final = finalOf(message, s.frameSeconds, s.offset);
  if (final) addFinal(final);
  else showPartial(message.segment, message.is_final ? null : message);
}

function onClosed(s, event) {
  releaseMicrophone(s);
  audioSeconds = s.offset + s.sent / s.context.sampleRate;
  session = null;
  if (!s.done) {
    showMessage(event.code === 1006
      ? `The connection to the server at ${location.host} was lost.`
      : `The server closed the connection (${event.code}${event.reason ? ": " + event.reason : ""}).`);
    setState("error");
  } else {
    if (!s.stopping) showMessage(`The server ended the session (${event.reason || "closed"}).`);
    setState("stopped");
  }
}

// -- controls ------------------------------------------------------------------------------
function download(extension, text, type) {
  const stamp = (startedAt || new Date()).toISOString().slice(0, 16).replace(/[-:T]/g, "");
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([text], { type }));
  link.download = `captions-${stamp}.${extension}`;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
}

ui.toggle.addEventListener("click", () => (session ? stop() : start()));
ui.txt.addEventListener("click", () => download("txt", txt(finals), "text/plain"));
ui.srt.addEventListener("click", () => download("srt", srt(finals), "application/x-subrip"));
ui.clear.addEventListener("click", () => {
  finals.length = 0;
  audioSeconds = 0;
  startedAt = null;
  ui.finals.replaceChildren();
  ui.partial.textContent = "";
  ui.txt.disabled = ui.srt.disabled = ui.clear.disabled = true;
});

function setLarge(on) {
  document.body.classList.toggle("large", on);
  ui.large.checked = on;
  ui.captions.scrollTop = ui.captions.scrollHeight;
}
ui.large.addEventListener("change", () => {
  setLarge(ui.large.checked);
  localStorage.setItem("streamdec-large", ui.large.checked ? "1" : "");
});
setLarge(new URLSearchParams(location.search).has("large") ||
  localStorage.getItem("streamdec-large") === "1");

setState("idle");
