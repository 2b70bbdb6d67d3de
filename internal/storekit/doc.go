// Package storekit holds the code the readpast stores (postgres, sqlite)
// share beyond the readpast.Store contract: how a batch that names a job
// or a unique key more than once is settled, how queue stats are merged
// and ordered, how a search page is cut, how big a bulk action's batches
// are, and where a page of a listing starts. Users of readpast never call
// it.
package storekit
