/**
 * The service's health as the AND of named parts, as upstream's health checker: `store`
 * (Redis answers) and, with `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`, `config` (the
 * last config loaded has a domain). Every change is applied to the servers' health
 * (`/healthcheck`, gRPC health).
 */
export class ServiceHealth {
  readonly #parts = new Map<string, boolean>();

  constructor(
    private readonly apply: (healthy: boolean) => void,
    parts: Readonly<Record<string, boolean>>,
  ) {
    for (const [name, ok] of Object.entries(parts)) this.#parts.set(name, ok);
    this.apply(this.healthy);
  }

  get healthy(): boolean {
    return [...this.#parts.values()].every(Boolean);
  }

  /** Sets one part; a part the service was not built with is ignored. */
  set(part: string, ok: boolean): void {
    if (!this.#parts.has(part)) return;
    this.#parts.set(part, ok);
    this.apply(this.healthy);
  }
}
