package storekit

// BulkBatch is how many jobs a bulk action (Store.BulkRetry, BulkCancel,
// BulkDelete) changes per transaction.
const BulkBatch = 1000
