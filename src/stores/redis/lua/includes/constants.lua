-- The constants the scripts share with the TypeScript, in one place: one `local NAME = value`
-- a line, read by test/stores/redis/lua-constants.test.ts, which fails on any difference
-- from src/stores/redis (lua-args.ts, wire.ts, reply.ts, refund-call.ts).
-- BEGIN SHARED CONSTANTS
-- Algorithm codes: ALG[code], and the first byte of a packed state. One line per
-- algorithm, `local CODE_<KIND> = <its luaCode>`, written here from the registry
-- (src/algorithms/index.ts) when scripts.ts assembles a script.
--- @algorithm-codes
-- Decision statuses (STATUS in reply.ts, by index).
local STATUS_OK = 0
local STATUS_OVER_LIMIT = 1
local STATUS_INVALID_POLICY = 2
-- applyBatches: batch header flags, and the reply's per-batch tags.
local FLAG_CLIENT_CLOCK = 1
local FLAG_DEDUP = 2
local TAG_DECISIONS = 0
local TAG_NOT_SLUICE_STATE = 1
-- applyBatches: struct formats of a batch header, an item in, a decision out.
local BATCH_HEADER = '<BdHd'
local ITEM_IN = '<BddddddB'
local ITEM = '<Bdddd'
-- struct sizes, written out: `struct` does not exist while a function library loads
local ITEM_IN_BYTES = 50
-- a one-item batch's body: one decision, then the '<d' instant it was decided at
local ONE_BODY_BYTES = 41
-- refundBatch: first item argument, arguments per item, reply fields per item, and the
-- first field of a domain failure reply ({ NOT_SLUICE_STATE, item }).
local REFUND_FIRST_ARG = 3
local REFUND_ITEM_ARGS = 8
local REFUND_REPLY_FIELDS = 5
local NOT_SLUICE_STATE = -1
-- settleBatch: first item argument and arguments per item (its reply is refundBatch's
-- REFUND_REPLY_FIELDS per item, then one capped count per item, then the repeat flag).
local SETTLE_FIRST_ARG = 4
local SETTLE_ITEM_ARGS = 9
-- END SHARED CONSTANTS
