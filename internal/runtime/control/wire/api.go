package wire

// Paths of the control API, served on the pod's control port behind the
// pool's bearer token.
const (
	// StatePath: GET returns the pod's Report.
	StatePath = "/v1/state"
	// PlacementPath: PUT applies a Placement and answers a
	// PlacementResult.
	PlacementPath = "/v1/placement"
	// KVPath: GET ?program=<id> streams a program's cached KV blocks to
	// another pod of the pool, in the kvstream format.
	KVPath = "/v1/kv"
)

// MaxPlacementVersion is the highest placement version a pod applies: 2^53,
// exact as a JSON number anywhere, and more rounds than a controller runs
// in a hundred million years at one a second. A pod at a higher version
// could never be sent a newer one, and the controller, which continues
// from the highest version its pods report, would overflow.
const MaxPlacementVersion = int64(1) << 53
