// Package telemetry is the telemetry channel kind (PROTOCOL.md §8):
// samples from one source, many viewers, live-only, with explicit loss.
//
// A Channel numbers the samples it is given (Publish) into batches, each
// one telemetry/samples message with the next channel-wide seq, serialized
// once and shared by every viewer. It keeps a bounded recent history
// (Config.History, HistoryBatches, HistoryBytes) as the initial replay of
// a new viewer, which then gets channel/ready and live batches from the
// current seq.
//
// A channel admits at most Config.MaxSeries series (a name and its
// labels), whatever its policy: a sample of a new series beyond it is not
// published, only counted (Stats.SeriesRefused) and logged, at most once
// a minute; a series without samples for Config.SeriesIdle no longer
// counts. Its index of series (series.go), which coalescing reads, holds
// at most MaxSeries entries and 4 MiB of batch texts beyond its samples.
//
// Each viewer (Sub, a flow.Subscriber) has a bounded queue of batches
// (Config.QueueBatches, QueueBytes). Publish never waits for a viewer:
// when a queue is full the channel's Policy applies — drop the oldest
// unsent batches (the default), drop the newest, or coalesce to the
// latest sample per series — and the seqs dropped become one
// telemetry/dropped {fromSeq, toSeq, count} in their place (adjacent
// ranges merge). What Pull has handed out has left the queue and is never
// dropped: every seq is either delivered or inside a reported range, and
// the counts add up to the samples lost. A viewer's queued bytes are its
// Stats().Queued, which the daemon reports with the connection's other
// buffers; batches are shared, so the memory a channel holds is its
// history plus the largest queue, not one per viewer (coalesced batches
// are a viewer's own and count in its queue), plus its index of series.
//
// Coalescing is lazy. A coalescing viewer whose queue is full is behind:
// the batches it had not pulled leave its queue (but those of its last
// catch-up, whose series may have nothing newer), and Publish skips it
// from then on. When its Pull reaches the span it missed, the viewer
// takes from the channel's index the newest sample of each series the
// span updated — at most Config.CoalesceSeries, the most recently
// updated, within half its queue and its connection's budget — as
// batches of its own under the span's newest seqs, after one
// telemetry/dropped counting the rest. So Publish costs the samples
// encoded once plus O(1) per viewer not behind, however many viewers are
// behind, for how long, over how many series; a behind viewer holds no
// batch; and what a catch-up costs is its viewer's Pull's, bounded by
// CoalesceSeries.
//
// Sources (Source) run in a goroutine the Channel owns: New starts it and
// Close cancels it and waits for it. System reads /proc (CPU, memory,
// load, network and disk rates), Process a process tree, Command a child
// whose stdout lines are samples (ParseLine), and Func a callback (the
// daemon's own figures); a push channel has no source and is fed by
// Publish alone. For an upgrade in place (handover.go) Freeze stops the
// source, but a Command is held instead: its child runs on, and the pid,
// the stdout pipe and the line read but not parsed go to the Command of
// the restored channel, which adopts the child.
//
// Concurrency: Channel's methods and Publish are safe for concurrent use;
// a Sub's Pull is called from one goroutine at a time (the connection's
// owner), its other methods from any. One mutex per channel guards the
// history, the index of series and every viewer's queue; Publish holds it
// to admit a call's samples and then, per batch, for O(viewers not
// behind), hashing and encoding outside it.
package telemetry
