import { Option, type Command } from 'commander';
import type { FlagValue, ServiceSettings, XdsSettings } from '../service/env-settings.js';
import type { ServeOptions } from '../service/main.js';
import { SERVE_FLAGS } from './serve-flags.js';

/**
 * `sluice serve`: the rate limit service. Its settings module is imported first and the
 * service itself (gRPC, HTTP, the stores) only once the settings are valid, so that a
 * bad flag or variable stops the start without loading the service, and other commands
 * load neither.
 */
export function addServeCommand(program: Command, fail: (error: unknown) => never): void {
  const env = process.env;
  const serve = program
    .command('serve')
    .description(
      'Run the rate limit service: envoy RLS v3 gRPC, HTTP /json, /v1/check, /healthcheck, /metrics, /rlconfig',
    )
    .option(
      '--config <path>',
      'envoyproxy/ratelimit YAML file or directory (default: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY)',
    )
    .option('--policies <file>', 'Sluice-native policy file for /v1/check and sluice.v1');
  for (const f of SERVE_FLAGS) serve.option(f.spec, f.help);
  serve.action(async (o: Readonly<Record<string, string | undefined>>) => {
    try {
      // Flags and environment variables go through one validation, before anything
      // else: a bad value stops the start, naming the flag or variable.
      const { readServiceSettings } = await import('../service/env-settings.js');
      const flags: FlagValue[] = [];
      for (const f of SERVE_FLAGS) {
        const value = o[new Option(f.spec).attributeName()];
        if (value === undefined) continue;
        const flag = f.spec.split(' ')[0]!;
        flags.push({ setting: f.setting, flag, value });
        if (f.also !== undefined)
          flags.push({ setting: f.also.setting, flag, value: f.also.value });
      }
      const { logLevel, logFormatText, xds, leases, ...settings } = readServiceSettings(env, flags);
      const [{ startService }, { pino }] = await Promise.all([
        import('../service/main.js'),
        import('pino'),
      ]);
      const logger = pino({ name: 'sluice', level: logLevel });
      if (logFormatText) logger.warn('LOG_FORMAT=text: Sluice writes JSON logs only; logging JSON');
      // The settings are the service's options (each setting names its target in them);
      // only the certificate files of xDS and the leases are read here.
      const running = await startService({
        ...settings,
        ...(o.config === undefined ? {} : { envoyConfig: o.config }),
        ...(o.policies === undefined ? {} : { policiesFile: o.policies }),
        ...(xds === undefined ? {} : { xds: await xdsOptions(xds) }),
        ...(leases === undefined ? {} : { leases: await leaseOptions(leases) }),
        logger,
      });
      const stop = (): void => {
        void running.shutdown().then(() => process.exit(0));
      };
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
    } catch (error) {
      fail(error);
    }
  });
}

/** The xDS settings with their TLS files read. */
async function xdsOptions(xds: XdsSettings): Promise<NonNullable<ServeOptions['xds']>> {
  const { tls, ...rest } = xds;
  if (tls === undefined) return rest;
  const { readXdsTlsFiles } = await import('../service/xds/xds-tls-files.js');
  return { ...rest, tls: readXdsTlsFiles(tls) };
}

/** The lease settings with their TLS files read. */
async function leaseOptions(
  leases: NonNullable<ServiceSettings['leases']>,
): Promise<NonNullable<ServeOptions['leases']>> {
  const { tlsFiles, ...rest } = leases;
  if (tlsFiles === undefined) return rest;
  const { readLeaseTlsFiles } = await import('../service/env-settings.js');
  return { ...rest, tls: readLeaseTlsFiles(tlsFiles) };
}
