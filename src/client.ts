// The `sluice/client` entry point.
export {
  SluiceClient,
  type ClientCheckOptions,
  type ClientCheckResult,
  type ClientFailureMode,
  type ClientPath,
  type SluiceClientOptions,
} from './client/sluice-client.js';
