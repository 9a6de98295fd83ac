// Package ahpv1 is the Go code generated from the ahp.v1 control-plane API
// of ahpd (the *.proto files beside it; regenerate with `make gen`). The
// daemon serves it on its unix control socket (daemon/service/grpc.go);
// ahpctl (ctl/) is its client. Field semantics, units and limits are in the
// .proto comments.
package ahpv1
