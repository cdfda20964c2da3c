// A token bucket limiting the agent's Kubernetes request rate (QPS with a burst), like
// client-go's default limiter. Waiters are served in order.
export class TokenBucket {
  #tokens: number;
  #last: number;
  readonly #queue: Array<() => void> = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(
    readonly qps: number,
    readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.#tokens = burst;
    this.#last = now();
  }

  take(): Promise<void> {
    if (!(this.qps > 0)) return Promise.resolve();
    this.#refill();
    if (this.#queue.length === 0 && this.#tokens >= 1) {
      this.#tokens -= 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.#queue.push(resolve);
      this.#schedule();
    });
  }

  #refill(): void {
    const t = this.now();
    this.#tokens = Math.min(this.burst, this.#tokens + ((t - this.#last) / 1000) * this.qps);
    this.#last = t;
  }

  #schedule(): void {
    if (this.#timer) return;
    const wait = Math.max(1, Math.ceil(((1 - this.#tokens) / this.qps) * 1000));
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#refill();
      while (this.#queue.length > 0 && this.#tokens >= 1) {
        this.#tokens -= 1;
        this.#queue.shift()?.();
      }
      if (this.#queue.length > 0) this.#schedule();
    }, wait);
  }
}
