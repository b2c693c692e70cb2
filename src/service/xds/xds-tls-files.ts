import { readFileSync } from 'node:fs';
import { fsProblem } from '../../config/read-file.js';
import { PolicyError, formatIssue, type PolicyIssue } from '../../core/errors.js';
import type { XdsSettings } from '../env-settings.js';
import type { XdsTlsOptions } from './xds-config-client.js';

/**
 * Reads the xDS TLS files the settings name. Throws `PolicyError`
 * (`SLUICE_ERR_CONFIG_READ`) naming each variable whose file cannot be read, and a
 * client certificate given without its key (or the key without the certificate).
 */
export function readXdsTlsFiles(tls: NonNullable<XdsSettings['tls']>): XdsTlsOptions {
  const issues: PolicyIssue[] = [];
  const read = (variable: string, path: string): Buffer | undefined => {
    if (path === '') return undefined;
    try {
      return readFileSync(path);
    } catch (e) {
      issues.push({ path: variable, message: `cannot read ${path}: ${fsProblem(e)}` });
      return undefined;
    }
  };
  const caCert = read('CONFIG_GRPC_XDS_SERVER_TLS_CACERT', tls.caCertFile);
  const clientCert = read('CONFIG_GRPC_XDS_CLIENT_TLS_CERT', tls.clientCertFile);
  const clientKey = read('CONFIG_GRPC_XDS_CLIENT_TLS_KEY', tls.clientKeyFile);
  if ((tls.clientCertFile === '') !== (tls.clientKeyFile === '')) {
    issues.push({
      path: 'CONFIG_GRPC_XDS_CLIENT_TLS_CERT, CONFIG_GRPC_XDS_CLIENT_TLS_KEY',
      message: 'give both the client certificate and its key, or neither',
    });
  }
  if (issues.length > 0) {
    throw new PolicyError('SLUICE_ERR_CONFIG_READ', issues.map(formatIssue).join('\n'), {
      issues,
    });
  }
  return {
    ...(caCert === undefined ? {} : { caCert }),
    ...(clientCert === undefined ? {} : { clientCert }),
    ...(clientKey === undefined ? {} : { clientKey }),
    ...(tls.serverName === '' ? {} : { serverName: tls.serverName }),
  };
}
