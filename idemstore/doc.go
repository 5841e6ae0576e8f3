// Package idemstore is for the authors of idempotency stores: the [Store] interface that
// package idem's guard drives, the [Record] it stores, its statuses and encodings, and the
// errors a store answers with. It is to package idem what database/sql/driver is to
// database/sql: a handler author never imports it.
//
// A store keeps one [Record] per stored key and makes each operation atomic per key: a
// conditional claim (absent, expired, or lease-ended with the same checkpoint), and
// completion, release, lease extension and checkpoints conditional on the owner's lease
// token. Writes of one owner may arrive late, after later ones (a client's resend applies
// and its first attempt lands afterwards), so the two an owner repeats never go back: an
// extension never lowers the stored lease end, and a checkpoint write never replaces a
// checkpoint with a higher number ([Record.CheckpointSeq]). The stores in this repository (dynamo, memstore, pgstore, redisstore) implement
// it; package storetest holds the behaviour suite that proves a store keeps the contract,
// run from the store's own test (see storetest.Run's example):
//
//	storetest.Run(t, storetest.Harness{
//		NewStore: func(*testing.T) idemstore.Store { return memstore.New() },
//	})
//
// Times are time.Time; a store encodes them as it likes, but must round a record's ends
// (Expires, LeaseExpires) up, never down, when it stores them at a coarser resolution, so
// that no record ends earlier in the store than the guard decided.
package idemstore
