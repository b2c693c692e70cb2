// The `sluice/quota` entry point: quota leases by demand (docs/quota-leases.md). The
// controller core and its weighted max-min allocation, the agent and its lease stage,
// the partition bound, the controller process (Redis leader lease, RLQS v3 server) and
// the Sluice agent on the RLQS stream.
export {
  QuotaAgent,
  type AgentMode,
  type AgentOptions,
  type ApplyOutcome,
  type TakeResult,
} from './quota/agent.js';
export { allocate, type AllocateOptions, type Claim } from './quota/allocation.js';
export {
  campaignTickMs,
  defaultElectionTtlMs,
  leaseFailureBounds,
  leaseFailureSections,
  pacedSharesBound,
  partitionBound,
  partitionBoundSection,
  type FailureBound,
  type LeaseFailureBounds,
  type LeaseFailureInput,
  type PartitionBound,
  type PartitionBoundInput,
  type PartitionBoundLine,
} from './quota/bounds.js';
export {
  QuotaController,
  type AgentRecord,
  type ControllerState,
  type Grant,
  type RoundResult,
} from './quota/controller.js';
export {
  controllerConfig,
  type ControllerConfig,
  type ControllerOptions,
} from './quota/controller-config.js';
export {
  startQuotaController,
  type QuotaControllerProcess,
  type QuotaControllerProcessOptions,
} from './quota/controller-process.js';
export { LeaderLease, type LeaderRedis } from './quota/leader-lease.js';
export type { Lease, LeaseFallback, QuotaBudget, UsageReport } from './quota/lease.js';
export { LeaseStage, type LeaseStageOptions } from './quota/lease-stage.js';
export { RlqsAgentClient, type RlqsAgentClientOptions } from './quota/rlqs/agent-client.js';
export { bucketKey, type RlqsStrategyKind } from './quota/rlqs/mapping.js';
export { RLQS_SERVICE, RLQS_SERVICE_NAME } from './protocol/rlqs-protos.js';
export { RlqsQuotaService } from './quota/rlqs/quota-service.js';
export { AGENT_METADATA, TOKEN_METADATA } from './protocol/metadata.js';
export { simulateLeases, type SimulationReport } from './quota/simulation/simulate.js';
