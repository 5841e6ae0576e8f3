// Package sim is a deterministic simulation of idem, in the manner of FoundationDB's and
// TigerBeetle's: the code that ships (Guard, the batch path, the sqs wrapper, the
// lambdawrap HTTP wrapper) runs as it is, and only the store, the clock and the scheduling
// are simulated. One seed decides everything, so a failing schedule replays exactly.
//
// # The model
//
// A schedule ([Run]) draws a profile from its seed: which features it uses (a subset of
// [Config.Features]; see [Features]), the guard's options (lease, margin, WithMaxLease,
// WithHeartbeat, WithWait, WithRememberFailures, WithCache, WithFailOpen, WithExpiry),
// whether the store implements idemstore.BatchStore, and the odds of each fault. It then
// plans a handful of actors over a handful of keys (one to three per kind of caller):
//
//   - do: idem.Do, sometimes with another body for the same key (a payload mismatch);
//   - batch: Guard.Claim, DoClaimed (sequentially or concurrently) and Settle, sometimes
//     with an extra Settle racing the handlers; with FeatBatchMix, more requests for its
//     keys (duplicates, and requests with another body, anywhere in the batch, now and
//     then more than 25 in all), some with a deadline of their own before the caller's
//     (the caller then settles before each), and sometimes a final Settle that does not
//     wait for the earlier ones still under way;
//   - sqs and fifo: sqs.Handler.Handle on a standard or FIFO queue, with batch claims on
//     or off, a drawn concurrency and deadline margin, over a queue whose messages are
//     redelivered until acknowledged (ApproximateReceiveCount counts up), sometimes twice
//     in one batch, sometimes with a second body for one key;
//   - http: lambdawrap.HTTPAPI;
//   - stream (FeatStream): a Kinesis or DynamoDB stream of one or two shards, each a
//     sequence of records with an ordering key (partition key, item key) and a key of its
//     own (the default keys: a sequence number, an eventID), read by a simulated event
//     source mapping with ReportBatchItemFailures, whose invocations run batch.Engine in
//     its ordered mode with RecordBeforeNext, as packages kinesis and dynamostream do.
//     The mapping invokes a batch of up to BatchSize records from the shard's checkpoint;
//     the response's lowest failed sequence number is the new checkpoint (else the batch's
//     end), and it invokes again from there, so records after a failure that finished are
//     delivered again and must replay. An invocation that crashed or was killed fails when
//     its deadline passes, one whose response was lost fails at once and its batch is sent
//     again, and with BisectBatchOnFunctionError such a failure halves the next batch.
//     Now and then Lambda runs a batch twice (a duplicate invocation, started soon after
//     or after a lease's length, when the first may still run with its lease ended): the
//     mapping takes the first's response. Retries are unbounded (MaximumRetryAttempts -1,
//     Lambda's default) for a drawn number of invocations; the final phase then drives
//     each shard to its end without faults, waiting out every lease between failures, and
//     sends a record that fails three times in a row there to the on-failure destination.
//     With streamwait (FeatStreamWait) each invocation before the final phase draws
//     batch.WithWaitInFlight on or off: a record whose key another run holds polls it on
//     the container's clock until that run completes, its lease ends or the cut-off.
//
// Each actor is one invocation in one of up to three containers; a container is a guard
// with its own local cache and its own clock, skewed (FeatSkew) by up to 2 s behind or by
// less than the lease margin ahead. With FeatClockStep one container's clock steps once
// mid-run to another skew in that range, as NTP stepping a wall clock: what it reads
// moves, its timers and the deadlines of contexts made before do not (Go waits in
// monotonic time), and the invariants read an owner's clock at its lowest reading that
// mattered (its invocation's start, its lease's grant, now) and a claimer's by the time
// its claim carried, which it read before the step if it did. Lambda actors (sqs, fifo,
// http) always have a deadline, do and batch actors usually. A context's deadline is read
// on its container's clock, as a Go context's on its host: it ends when that clock reads
// it. With FeatKill an invocation is killed (stops for good) at its deadline in true time,
// as Lambda does. With FeatCrash any actor may stop for good between two steps. A batch
// caller with a deadline settles when its clock reads the deadline less 100 ms if handlers
// still run, as idem.Batch asks (Settle before the deadline) and the SQS wrapper does.
//
// Every handler is the same simulated handler: at its start the scheduler draws its plan
// (work steps, where time may pass; checkpoints; then success, an error, a remembered
// failure, a panic or an HTTP 500; possibly an attached write, possibly one whose
// condition fails). It honours its context before every step. With FeatPause a work step
// may stall for up to twice the lease (a slow call), honouring nothing until it resumes,
// while the lease watchdog runs on. A successful run records
// its effect in the ledger and returns "<key>#r<run>", so every answer names the run
// that computed it.
//
// # Scheduling
//
// Real goroutines run the real code, but only one at a time. Every store call, every
// handler step and every timer of the clock is a scheduling point: the goroutine blocks
// until the scheduler releases it. The scheduler runs with GOMAXPROCS(1) ([Prepare]) and,
// before each decision, yields until the world is quiet: every runnable goroutine,
// including those the library starts without telling (lease watchdogs and heartbeats, sqs
// workers, the settle timer), has run until it blocked, which shows as several yields in a
// row without activity (every point, clock read and deadline read counts as activity),
// confirmed by the runtime's counts of runnable goroutines and of those in a system call,
// both zero. Goroutines that wake without being released (a request whose context ended)
// note their trace lines, which enter the trace sorted by label. It then sorts
// the waiting points by a stable label (actor, kind, operation, key) and picks one with
// the seeded generator, or moves time on. TestSimulationDeterminism runs seeds twice and
// requires identical traces; the labels are unique in practice, and
// [Stats.Collisions] counts the exceptions.
//
// Time is true time, kept by the scheduler. It moves to the next event (a timer, a
// deadline, an actor's start, a late request's landing), by a little, or by seconds (past
// leases). While a store
// request is in flight it moves by at most 30 ms, unless the store stalls (FeatLate):
// store calls are fast, and a slow one is a fault to inject. All timers due at one
// instant fire together, so their order never matters; once the schedule is over every
// timer fires at once, so that goroutines waiting on one (a completion's backoff, on a
// context detached from the caller's) unwind without waiting in wall time. Contexts are
// the actors' own: their Deadline is in simulated time and they end when their
// container's clock passes it; a batch request's own context (FeatBatchMix) derives from
// its actor's, and ends at its own deadline the same way. Its points' labels carry the
// request's index, so that requests of one key stay apart. Such a batch's concurrent
// DoClaimed calls each pass a point first: which request of a key calls first decides
// which runs it and which share its outcome, so the scheduler decides it, not the order
// the runtime runs goroutines in (random under the race detector). A request whose own
// context has ended may be answered its key's outcome or its context's error, as a select
// in the library draws: its answer is judged but not traced, the other error answers of
// such a batch are traced without their text (they may share it), and a store request
// such a batch makes on a context that has ended is not sent (as the SDK does), without a
// point.
//
// # The store
//
// The simulated store wraps a real *memstore.Store, the reference semantics, and puts a
// point before every request; every call goes through one request path (store.send).
// There the scheduler may let it apply and answer; fail it without applying (FeatFail);
// apply it and lose the response (FeatLost), or for a claim (with FeatDelay, any write)
// apply it, lose the response and let the SDK resend it, which meets what its first
// attempt wrote; apply it and answer only at a later point (FeatLate). With FeatItemFail
// some items of a batch request (claims, completions, releases) fail without applying
// while the others apply. With FeatBatchMix some items of a batch claim fail with the
// record they met, as idemstore.Store.Claim allows: an insert that met an item it could not
// read (the key alone, not applied), or a refusal whose result could not be read (the
// record without its data). (A refusal without a record breaks the contract and is not
// modelled.)
//
// Late delivery (FeatDelay). The AWS SDK resends a request whose connection broke, and
// the first attempt may still reach DynamoDB after the resend, or after later requests of
// the same caller. So a write (a claim, completion, release, extension, checkpoint, batch
// claim, completion or release) may be resent at its point: the resend applies and
// answers at once, and the first attempt lands at a time the scheduler draws within the
// SDK's retry window (3 s: within 30 ms, 500 ms or 3 s, one time in three each), applying
// exactly what it carried (a claim its record as it was sent, at its own time) on a
// context that does not end. As the SDK does, a request whose context ends while it waits
// (before applying, or for its late answer) returns the context's error at once; with
// FeatDelay it may have been on its way, and lands later all the same one time in two. A
// killed invocation's requests stay frozen. The draws of these features come from a
// generator of their own, so a schedule without them is what it was before they existed.
//
// Attached writes are func() error for the MemStore; the simulated ones append to the
// ledger inside it, so they commit exactly with the completion. The ledger learns the
// lease end and the checkpoint an extension or a checkpoint left from the record, not from
// the request, so a store that keeps a later value is judged by what it holds.
//
// # The invariants
//
// The ledger keeps the ground truth: every lease the store granted (a run: its token,
// claim time and lease end as the store holds it, in true time), every checkpoint,
// completion and attached write that applied, every effect and every answer, and what
// the store acknowledged to each owner (its extensions and checkpoints). Checked
// during and after every schedule, each violation named by invariant and class:
//
//   - (a) effects at most once per key, within the clock skew the lease margin
//     tolerates: a claimer's clock ahead of the owner's by less than the margin, or, for a
//     lease ending at a deadline Lambda enforces by a kill, ahead of true time by less
//     than the margin. a.overlap: two runs of a key ran at once, both with live contexts,
//     the later claim from a clock within the tolerance (beyond it they are counted in
//     [Stats.OverlapBeyondSkew]; a re-run after an earlier run ended unrecorded, in
//     [Stats.Reruns]). a.pastLease.*: a run performed its effect, its context still live,
//     once its owner's clock read its lease end less the margin: the handler's context
//     never outlives its lease (the deadline, or the lease watchdog, ends it by then).
//     a.lostOutcome: an SQS or stream invocation killed at its deadline had a handler that finished
//     before it whose outcome was never sent, though its clock ran behind by less than its
//     deadline margin (else [Stats.LostBeyondSkew]). a.outcomePastLease: a run finished
//     within its lease, its outcome was sent after the lease ended, and another run took
//     the key over meanwhile from a clock within the tolerance. a.afterComplete: a claim
//     took a key whose completed record was live. a.failOpenCancelled: a fail-open
//     handler ran on an ended context. a.unknownLease: a handler ran under a lease the
//     store never granted. a.leaseShortened: while a run holds its record, the stored
//     lease end fell below the end its lease watchdog counts on (its claim's, or the
//     latest an extension answered to it confirmed), so another caller could take the
//     key over under a live context (an extension's first attempt landing late).
//     a.failOpenAfterMet: a caller (one Do, one batch, one invocation) ran a handler
//     unguarded (WithFailOpen) for a key one of its claims had been answered with a record
//     of (met, or its own): an sqs or stream invocation's claims include its batch claim,
//     the claims of items with another body and the polls of batch.WithWaitInFlight, which
//     share what the batch met (the shared idem.KeyMet).
//   - (b) every answer a caller got equals the recorded result: a computed result was
//     recorded by its own run (b.answerNotRecorded, b.answerDiffers), a replay equals a
//     recorded result or remembered failure (b.replayDiffers), recorded for the request's
//     own body (b.answerOtherBody); a batch request's result, or its replay of its run's
//     remembered failure, is judged only if the final Settle reports no recording error
//     for it (else it was not durable, and the caller learns so); idem.ErrPayloadMismatch
//     only once a request with another body held the key (b.mismatchWithoutOther). The
//     requests of one batch with one key and body run it at most once (b.batchRanTwice),
//     and once one is answered a result, every other is answered that result unless its
//     own context ended (b.batchDupDiffers): see idem.Guard.Claim. A Settle that answers
//     nil for a request whose DoClaimed returned a result before that Settle began has it
//     recorded (b.settleNotRecorded). A completion's first attempt is never sent already
//     expired on its sender's clock (b.completedExpired: Settle counts the expiry from its
//     recording).
//   - (c) a checkpoint once acknowledged to its owner is seen (idem.LastCheckpoint at the
//     handler's start) by every later owner of the key until it completes or expires, or
//     one written after it (by a request sent after the acknowledgement) that applied;
//     after expiry the old one may or may not be seen. c.checkpointLost.late: the record
//     holds a checkpoint whose request was sent before the one acknowledged last and
//     landed after it (reported when it lands, or when the later one is acknowledged): an
//     owner taking over would resume from an earlier step. c.checkpointLost.release: a
//     release deleted it;
//     .resend: the claim's response was lost and its resend met its own record; .carry:
//     a takeover claim replaced the record and the checkpoint was not written back (the
//     claim's response was lost, or the write-back failed).
//   - (d) once every lease has ended (the final phase moves time past them and calls each
//     key once more, without faults; an SQS finisher runs its batch's messages at once, so
//     each fits the lease WithMaxLease caps as a Do call does, and the stream is invoked
//     once the other finishers have ended), no key is left INPROGRESS
//     (d.leftInProgress), every final call gets a result, a replay or a remembered
//     failure (d.notSettled), and the schedule finishes (d.stuck). One record rightly
//     stays: in progress, its lease ended, unexpired, with the checkpoint of a request
//     with another body, which the final call's claim met; that call gets
//     idem.ErrPayloadMismatch. A record past its expiry counts as absent. d.heldByNobody:
//     a claim landing late took the key for a lease its owner had released or completed,
//     its lease still running: every retry is refused until it ends. (A late claim for a
//     caller that never held the lease, which gave up or was refused before it knew, or
//     one that met a record expired by the time it carried, is counted in
//     [Stats.Orphans]: the lease runs out, as after a caller that crashes once its claim
//     applied.)
//   - (e) attached writes commit at most once and only with their COMPLETED record
//     (e.attachedTwice, e.attachedWithoutRecord, e.recordWithoutAttached).
//   - (f) the SQS batch response fails exactly the messages that did not complete:
//     an acknowledged message's key has a COMPLETED record for its body
//     (f.ackedNotCompleted), and no message whose completion this invocation saw recorded
//     is reported failed (f.failedButCompleted).
//   - (g) the stream's order and checkpoint (FeatStream). A record is finished once its
//     key has a COMPLETED record for its body (or a fail-open run of it succeeded, or the
//     final phase sent it to the on-failure destination). g.order: a run of a record
//     started while an earlier record of its ordering key in its shard was unfinished.
//     g.checkpointPassed: an invocation's response (the mapping's, or a duplicate's it
//     ignores) would move the checkpoint past an unfinished record. g.unstartedHeld: an
//     invocation returned, and a record it did not start (its group
//     stopped, too little time left) is held by a live lease of its claim whose answer it
//     heard, beyond the margin, and whose release it never made: the redelivery would be
//     refused until that lease ends. Invariant (a) holds
//     per record too: a.streamTwice, a record's effect performed again though a completion
//     of it had landed before this run's claim and was live then (within the skew); a
//     re-run after an earlier run ended unrecorded, or after its record expired, is
//     allowed, as for every key. Invariant (d) is the checkpoint for a stream, not the
//     table: a record the checkpoint passed is never delivered again, so a duplicate's
//     lease of it rightly stays until the record expires (its keys are exempt from
//     d.leftInProgress). d.streamStuck: a shard's checkpoint did not reach its end in
//     the final phase; d.streamSkipped: the final phase sent a record to the on-failure
//     destination without a failure remembered for its key (WithRememberFailures), the
//     one failure that rightly persists once faults stop. Records skipped by exhausted
//     retries under faults are not modelled: with MaximumRetryAttempts set, Lambda skips
//     records by design, and no check could tell that from a bug.
//
// A failing schedule's [Result.Report] prints its seed, the violations and the trace;
// `make sim SEED=<n>` replays it.
package sim
