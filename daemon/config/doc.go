// Package config is ahpd's configuration: Config (what the daemon is
// started with), Limits (the per-connection bounds of PROTOCOL.md §9, which
// may change at run time) with their defaults and validation, which follow
// the one table of limits in internal/limits (each Limits field is tagged
// with its row), and the config file (TOML, read with go-toml/v2:
// Settings, LoadSettings, FindFile), whose errors name the file, the line
// and the key.
//
// Everything here is a value or a pure function: safe for concurrent use,
// no goroutines, no I/O except LoadSettings and FindFile reading the file
// system.
package config
