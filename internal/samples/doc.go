// Package samples is the telemetry sample of PROTOCOL.md §8 and its line
// formats (§10), shared by the telemetry channel kind (package telemetry:
// command sources) and the CLI (`ahpctl telemetry push`), which may not
// import the channel package (internal/deptest). Both read lines with
// ParseLine and check samples with Normalize, so a line the CLI accepts is
// one the daemon accepts.
package samples
