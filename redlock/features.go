package redlock

// Optional features: what a node may refuse without the lock failing. A
// least-privilege ACL user may lack the waiters' queue (ZADD, ZREM,
// ZPOPMIN), the channels (SUBSCRIBE, PUBLISH) or INFO. The lock works
// without them: waiters poll and hear the releases announced to all, and
// nodes are not checked for being one server. A feature a node refuses is
// recorded once, shown by [Redlock.Health], and reported to the Observer
// once, as a failure of that node wrapping [ErrMisconfigured].

// The optional features, by the name [NodeHealth.Off] gives them.
const (
	// FeatureQueue is the waiters' queue kept on the node (ZADD, ZREM,
	// ZPOPMIN on name + ":redlock:waiters"): without it, waiters do not
	// take turns on that node.
	FeatureQueue = "queue"
	// FeatureIdentify is INFO, which names the server behind the node:
	// without it, two clients of one server are not found out, and a
	// release go-redis resent after losing its reply counts as not held.
	FeatureIdentify = "identify"
	// FeatureScripts is Lua scripting (EVALSHA, EVAL): a node that refuses
	// it is spoken to without scripts from then on (see [NodeHealth.Way]
	// and [WithoutScripts]): a Mutex works in full, semaphores,
	// reader-writer and multi-name locks are refused there.
	FeatureScripts = "scripts"
	// FeatureClock is TIME, read with every vote for the clock guard (see
	// [WithClockTolerance]): without it, the node's clock is not checked.
	FeatureClock = "clock"
)
