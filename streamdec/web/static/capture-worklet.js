// Audio capture for the captioning page, on the audio rendering thread.
//
// Mixes the input's channels down to mono and hands the main thread blocks of
// `blockSize` float32 samples (processorOptions.blockSize), at the context's own
// rate: the server resamples. A message "flush" hands over the samples of the
// block begun so far as {flushed: Float32Array}, the capture's last block.
class CaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.blockSize = options.processorOptions.blockSize;
    this.block = new Float32Array(this.blockSize);
    this.filled = 0;
    this.port.onmessage = (event) => {
      if (event.data === "flush") {
        const rest = this.block.slice(0, this.filled);
        this.filled = 0;
        this.port.postMessage({ flushed: rest }, [rest.buffer]);
      }
    };
  }

  process(inputs) {
    const channels = inputs[0];
    if (!channels || channels.length === 0) return true; // nothing connected (yet)
    const frames = channels[0].length;
    for (let i = 0; i < frames; i++) {
      let sum = 0;
      for (let c = 0; c < channels.length; c++) sum += channels[c][i];
      this.block[this.filled++] = channels.length === 1 ? sum : sum / channels.length;
      if (this.filled === this.blockSize) {
        const full = this.block;
        this.port.postMessage(full, [full.buffer]);
        this.block = new Float32Array(this.blockSize);
        this.filled = 0;
      }
    }
    return true;
  }
}

registerProcessor("streamdec-capture", CaptureProcessor);
