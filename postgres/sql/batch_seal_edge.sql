-- Store the seal of batch $1 (its finishing job's id) with policy $2: an
-- edge into the finishing job from -$1, a parent no job has, which only
-- SealBatch resolves (batch_seal.sql). Until then it holds the finishing
-- job blocked, one of its waiting_on (docs/design/workflows.md,
-- "Batches").
INSERT INTO readpast_edges (parent_id, child_id, policy) VALUES (-$1::bigint, $1::bigint, $2::text)
