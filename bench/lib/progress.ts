/** A one-line progress display on stderr (rewritten in place on a TTY). */
export class Progress {
  readonly #tty = process.stderr.isTTY === true;
  readonly #start = Date.now();
  #lastLen = 0;

  update(text: string): void {
    const line = `[${((Date.now() - this.#start) / 1000).toFixed(0).padStart(4)} s] ${text}`;
    if (this.#tty) {
      process.stderr.write(`\r${line.padEnd(this.#lastLen)}`);
      this.#lastLen = line.length;
    } else {
      process.stderr.write(`${line}\n`);
    }
  }

  /** Ends the current line, keeping it visible. */
  done(text: string): void {
    this.update(text);
    if (this.#tty) process.stderr.write('\n');
    this.#lastLen = 0;
  }
}
