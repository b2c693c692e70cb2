import { readGrpcClientTlsFiles, type GrpcClientTlsFiles } from '../grpc-client-tls.js';
import type { XdsTlsOptions } from './xds-config-client.js';

/**
 * Reads the xDS TLS files the settings name. Throws `PolicyError`
 * (`SLUICE_ERR_CONFIG_READ`) naming each variable whose file cannot be read, and a
 * client certificate given without its key (or the key without the certificate).
 */
export function readXdsTlsFiles(tls: GrpcClientTlsFiles): XdsTlsOptions {
  return readGrpcClientTlsFiles(tls, {
    caCert: 'CONFIG_GRPC_XDS_SERVER_TLS_CACERT',
    clientCert: 'CONFIG_GRPC_XDS_CLIENT_TLS_CERT',
    clientKey: 'CONFIG_GRPC_XDS_CLIENT_TLS_KEY',
  });
}
