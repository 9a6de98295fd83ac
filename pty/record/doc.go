// Package record writes and reads terminal recordings (issue 42):
// asciicast v2 files (https://docs.asciinema.org/manual/asciicast/v2/)
// that play in asciinema, with a sidecar index of keyframes, audit
// events and drops that lets a player seek.
//
// # Files
//
// A Store is a directory (mode 0700) of recordings. A recording is two
// files (mode 0600) with the same stem, its id CHANNEL-START: CHANNEL is
// the channel id with every character outside [A-Za-z0-9._-] replaced by
// '_' (SafeChannel), START the UTC start as 20061207T150405Z, with "-2",
// "-3"… added when a recording of the channel started in the same second.
//
// ID.cast is asciicast v2: a header line {"version":2,"width","height",
// "timestamp","title","env":{"TERM"}}, then one event per line,
// [seconds, "o"|"i"|"r"|"m", "text"], seconds since the header's
// timestamp with microseconds, never decreasing. "o" is output, "i" input
// (only in mode OutputInput), "r" a resize ("COLSxROWS"), "m" a marker:
// "dropped N bytes", "continued in ID", "recording stopped: reason". Text
// is UTF-8: a sequence cut between two writes is held until it is whole
// (OutputBytes), and an invalid byte becomes U+FFFD, so `asciinema cat`
// gives back the program's bytes exactly whenever the program wrote valid
// UTF-8. (A terminal's recording holds the output as its viewers receive
// it: terminal queries, which the daemon answers, are not in it.) Output
// is cut into events of at most MaxEventLine (64 KiB) per line.
//
// ID.index.jsonl holds one JSON object per line: {"type":"keyframe",
// "time","offset","rows","cols","screen"}, {"type":"audit","time","event",
// "viewer","token","role","remote","detail"} and {"type":"dropped","time",
// "bytes"}. A keyframe's screen, written into a fresh terminal of
// rows×cols, rebuilds the screen, cursor, pen and modes (not the
// scrollback) as they were after every event before offset, the byte
// offset in the .cast of the first event line written after it; replaying
// the events from offset then goes on from there. Every file starts with
// a keyframe at the offset of its first event, time 0, and an audit
// record-on whose detail is the mode; it ends with an audit record-off
// whose detail is the reason.
//
// # Limits
//
// Limits (the daemon's limits table) bound the disk and the memory. A
// file whose .cast and index together would pass MaxBytes with the next
// line gets a marker "continued in ID" and is closed, and the recording
// goes on in a new file that starts with a header and a keyframe: every
// file plays and seeks on its own. Before a write would take the directory
// past MaxTotalBytes, the oldest recordings not being written are
// evicted (both files); when only recordings being written are left, the
// line is dropped (and accounted as below) rather than written. A new
// file's header and first keyframe are written even then: they may pass
// the total by their size. A keyframe is taken once KeyframeBytes of
// output or KeyframeInterval with some output followed the previous one.
//
// # Never blocking the terminal
//
// A Recorder's event methods format their line into a queue of at most
// QueueBytes and return: a goroutine per Recorder writes the queue to
// disk: event lines once 96 KiB of them are queued, or 20 ms after the
// first of them (Flush: now), markers and index lines at once. Output that does not fit is dropped: the next event that fits is
// preceded by a marker "dropped N bytes", an index line "dropped", and a
// keyframe (so a player is right again from there); StoreStats counts the
// bytes. Markers and audit lines may take the queue up to one
// MaxEventLine past its bound; a new file's header and first keyframe are
// always queued.
//
// # Concurrency
//
// Store and Recorder methods are safe for concurrent use. A Store keeps
// what it knows of its files in memory (it reads the directory at
// OpenStore); ids freed by an eviction are not given again while it runs. A Recorder
// calls Params.Snapshot from within its event methods, with its own lock
// held; the caller makes the screen still while it calls them (package
// pty calls them with its emulator locked, before it applies the event).
// Recorder.Stop and Store.Close return only after the writers they stop
// have written everything queued and closed their files; a disk that
// never returns from a write holds them up.
//
// # Reading
//
// NewReader and Reader.Next (or Events) read a .cast of any origin (lines
// up to MaxReadLine); ParseHeader, ParseEvent and ParseIndexLine check
// one line each and say what is wrong with it; ReadIndex reads an index.
// A live file's last line may be incomplete: Reader.Next returns
// io.ErrUnexpectedEOF for it, ReadIndex stops before it. FuzzCast and
// FuzzIndex check that no input makes them panic or hang and that what
// they accept re-encodes and parses the same.
package record
