// The captioning page's transcript: words of sherpa-onnx results, and the TXT and SRT
// downloads.
//
// The SRT follows the rules of streamdec.files.formats (the Python side), which the tests check
// against this file on the same results: cues of at most MAX_LINES lines of at most
// MAX_LINE_CHARS characters and at most MAX_CUE_SECONDS on screen, split between words by
// the words' times, never across segments. Change both together.

export const MAX_LINES = 2;
export const MAX_LINE_CHARS = 42;
export const MAX_CUE_SECONDS = 7.0;
export const MIN_CUE_SECONDS = 1.0;
export const CUE_TAIL = 0.4;

// Characters as Python counts them (code points, not UTF-16 units).
const length = (text) => [...text].length;

// Python's round(x, 6) on the values at hand: seconds from sums of 2-decimal numbers.
const round6 = (x) => Math.round(x * 1e6) / 1e6;

// Python's round(x) for a float: halves go to the even neighbour.
function roundHalfEven(x) {
  const down = Math.floor(x);
  const diff = x - down;
  if (diff > 0.5) return down + 1;
  if (diff < 0.5) return down;
  return down % 2 === 0 ? down : down + 1;
}

// A unit of a sherpa-onnx result that is no text: the word boundary alone (sent as a
// space), or a special symbol such as <unk> (byte pieces <0xNN> are text).
const special = (token) => /^<[^>]*>$/.test(token) && !/^<0x[0-9A-Fa-f]{2}>$/.test(token);

// Words of one sherpa-onnx result message with their times in seconds from the stream
// start plus `offset`: a unit that begins with a space (the word boundary) opens a word; a
// word starts at its first unit's time and ends one encoder frame (`frameSeconds`) after
// its last unit's time. Texts are the message's words when they match one for one (grammar
// mode shows [unk] for a word), else the units joined.
export function wordsOf(message, frameSeconds, offset = 0) {
  const spans = []; // [first unit, last unit]
  let open = null;
  message.tokens.forEach((token, n) => {
    if (/^\s/.test(token)) open = null;
    if (token.trim() === "" || special(token)) return;
    if (open === null) {
      open = [n, n];
      spans.push(open);
    } else {
      open[1] = n;
    }
  });
  const texts = message.text.split(/\s+/).filter((w) => w);
  const joined = spans.map(([a, b]) => message.tokens.slice(a, b + 1).join("").trim());
  const words = texts.length === spans.length ? texts : joined;
  return spans.map(([a, b], i) => ({
    text: words[i],
    start: round6(message.start_time + message.timestamps[a] + offset),
    end: round6(message.start_time + message.timestamps[b] + frameSeconds + offset),
  }));
}

// The final of a sherpa-onnx result message, as the page keeps it: {segment, text, words};
// null for a partial result or a final without text.
// A final formatted for people (it has `display`) shows its display text and words.
export function finalOf(message, frameSeconds, offset = 0) {
  if (!message.is_final || !message.text) return null;
  if (typeof message.display === "string") {
    return { segment: message.segment, text: message.display,
             words: message.display_words.map((w) => ({
               text: w.word, start: round6(w.start + offset), end: round6(w.end + offset) })) };
  }
  return { segment: message.segment, text: message.text,
           words: wordsOf(message, frameSeconds, offset) };
}

// A partial result message's text as [stable, unstable]: `stable` (streamdec's field) counts
// the leading characters (code points) that will not change any more; 0 without it.
export function partialParts(message) {
  const chars = [...message.text];
  const stable = Math.min(Math.max(message.stable || 0, 0), chars.length);
  return [chars.slice(0, stable).join(""), chars.slice(stable).join("")];
}

// Words as lines of at most `width` characters, each line filled before the next.
function fill(words, width) {
  const lines = [words[0]];
  for (const w of words.slice(1)) {
    const last = lines.length - 1;
    if (length(lines[last]) + 1 + length(w) <= width) lines[last] += " " + w;
    else lines.push(w);
  }
  return lines;
}

// `words` as at most `maxLines` lines of at most `maxChars` characters, broken between
// words and as even in length as the fewest lines allow; null when they do not fit.
export function wrapLines(words, maxChars = MAX_LINE_CHARS, maxLines = MAX_LINES) {
  const fewest = fill(words, maxChars).length;
  if (fewest > maxLines) return null;
  if (fewest === 1) return [words.join(" ")];
  for (let width = Math.max(...words.map(length)); width < maxChars; width++) {
    const lines = fill(words, width);
    if (lines.length === fewest) return lines;
  }
  return fill(words, maxChars);
}

// Display times of a cue from word `first` to word `last` (see streamdec.files.formats.cue_times).
export function cueTimes(first, last, nextStart, maxSeconds = MAX_CUE_SECONDS) {
  const start = first.start;
  let end = Math.max(last.end + CUE_TAIL, start + MIN_CUE_SECONDS);
  end = Math.min(end, Math.max(start + maxSeconds, last.end));
  if (nextStart !== null && nextStart > start) end = Math.min(end, nextStart);
  return [start, end];
}

// Cues of the finals (each {words: [{text, start, end}]}): a segment's words go into one
// cue while its lines fit and its words span at most MAX_CUE_SECONDS; a cue never holds
// two segments' words.
export function cues(finals) {
  const groups = [];
  for (const final of finals) {
    if (final.words.length === 0) continue;
    let group = [];
    for (const w of final.words) {
      if (group.length > 0 && (w.end - group[0].start > MAX_CUE_SECONDS ||
          fill([...group, w].map((x) => x.text), MAX_LINE_CHARS).length > MAX_LINES)) {
        groups.push(group);
        group = [];
      }
      group.push(w);
    }
    groups.push(group);
  }
  return groups.map((group, n) => {
    const nextStart = n + 1 < groups.length ? groups[n + 1][0].start : null;
    const [start, end] = cueTimes(group[0], group[group.length - 1], nextStart);
    return { start, end, lines: wrapLines(group.map((w) => w.text)) };
  });
}

const pad = (n, width) => String(n).padStart(width, "0");

// hh:mm:ss,mmm
function srtClock(seconds) {
  let ms = roundHalfEven(seconds * 1000);
  const h = Math.floor(ms / 3600000);
  ms -= h * 3600000;
  const m = Math.floor(ms / 60000);
  ms -= m * 60000;
  const s = Math.floor(ms / 1000);
  ms -= s * 1000;
  return `${pad(h, 2)}:${pad(m, 2)}:${pad(s, 2)},${pad(ms, 3)}`;
}

// SRT text of the finals' cues; every cue, the last too, ends with a blank line.
export function srt(finals) {
  return cues(finals).map((cue, n) =>
    `${n + 1}\n${srtClock(cue.start)} --> ${srtClock(cue.end)}\n` +
    cue.lines.map((line) => line + "\n").join("") + "\n").join("");
}

// The transcript as plain text: one line per utterance (final).
export function txt(finals) {
  return finals.map((final) => final.text + "\n").join("");
}

// mm:ss.ss, as `streamdec mic` shows a final's times.
export function shortClock(seconds) {
  const t = Math.max(0, seconds);
  const minutes = Math.floor(t / 60);
  const centis = roundHalfEven((t - minutes * 60) * 100);
  return `${pad(minutes, 2)}:${pad(Math.floor(centis / 100), 2)}.${pad(centis % 100, 2)}`;
}
