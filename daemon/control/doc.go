// Package control is the transport of ahpd's control plane (PROTOCOL.md
// §10): the unix socket that the gRPC API of proto/ahp/v1 is served on, and
// the gRPC server around it (health, reflection served from the generated
// code's own descriptors, logging, bounded graceful stop). It knows nothing of the daemon: package daemon/service registers
// its services (daemon/service/grpc.go) on the *grpc.Server this package
// builds, so the dependency runs service → control, and cmd/ahpd starts it.
//
// Authorization is the socket's file permissions: the socket is mode 0660,
// so its owner (the daemon's user) and its group may connect, and whoever
// connects is an operator with every right. Listen creates it safely: it
// holds an exclusive lock (PATH.lock) for the socket's lifetime, refuses a
// path owned by another user, a parent directory that others may write,
// and a socket that another process still answers on, and removes a stale
// one. The mode is set before the socket listens, so no connection is ever
// accepted under a wider mode.
//
// Concurrency: a Listener and a Server are safe for concurrent use; Stop
// returns after the gRPC server has stopped.
package control
