// Package affinity keeps every request of a chunked upload on the server
// that created it, when several servers serve the same API active/active and
// an upload's state (its received chunks) lives on one of them only.
//
// The pieces, none of which knows about Caddy:
//
//   - Pattern finds the upload id in a request path such as
//     /api/uploads/{id}/chunks/3, and names the collection creations are
//     POSTed to (/api/uploads).
//   - ValidID is the gate every id passes before it is used as part of a
//     store key; IDFromLocation and IDFromJSON learn a new upload's id from
//     the creation response.
//   - Bindings records, in the short-lived store shared by every proxy, which
//     server owns which upload, for as long as the upload keeps being used.
//   - Rendezvous picks the server a creation goes to, the same one in every
//     proxy without coordination.
//   - Unreachable takes a server that creations could not connect to out of
//     that hashing until it accepts connections again.
package affinity
