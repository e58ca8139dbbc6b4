// Package scripts holds the Lua scripts the lock runs on each Redis node.
// Each script is a .lua file beside this one, whose opening comment states
// its KEYS, ARGV and return values; it is embedded at build time and run by
// its digest (EVALSHA, falling back to EVAL when a node does not have the
// script cached yet).
// guard.lua, stored.lua, granted.lua, announce.lua, clock.lua, rw_base.lua
// and rw.lua are the exceptions: not scripts, but functions that several
// scripts share, put in front of each; and release_head.lua,
// read_acquire_head.lua, read_release_head.lua and acquire_plain_tail.lua,
// the first lines of release.lua's, read_acquire.lua's and
// read_release.lua's scripts (their fast paths, ahead of the functions only
// the rest needs) and the last of acquire_plain.lua's (after them).
//
// The digests are constants, never computed here: a process in FIPS 140
// only mode (GODEBUG=fips140=only) refuses SHA-1, and go-redis'
// NewScript would hash at start. TestDigests, in the normal mode, checks
// each against its source and prints the right one when a script changes.
//
// It holds the scripts' text and digests only: which operation runs which
// script, and what a reply means, is internal/node's.
package scripts

import (
	_ "embed"
)

// Script is a Lua script and its SHA-1 digest, the name a node caches it by.
type Script struct {
	Source string
	Hash   string
}

var (
	//go:embed release_head.lua
	releaseHeadSource string
	//go:embed release.lua
	releaseSource string
	//go:embed extend.lua
	extendSource string
	//go:embed extend_many.lua
	extendManySource string
	//go:embed acquire_reentrant.lua
	acquireReentrantSource string
	//go:embed release_reentrant.lua
	releaseReentrantSource string
	//go:embed extend_reentrant.lua
	extendReentrantSource string
	//go:embed guard.lua
	guardSource string
	//go:embed acquire.lua
	acquireSource string
	//go:embed acquire_plain.lua
	acquirePlainSource string
	//go:embed acquire_plain_tail.lua
	acquirePlainTailSource string
	//go:embed fence.lua
	fenceSource string
	//go:embed set_fenced.lua
	setFencedSource string
	//go:embed announce.lua
	announceSource string
	//go:embed stored.lua
	storedSource string
	//go:embed granted.lua
	grantedSource string
	//go:embed inspect.lua
	inspectSource string
	//go:embed force_release.lua
	forceReleaseSource string
	//go:embed acquire_multi.lua
	acquireMultiSource string
	//go:embed release_multi.lua
	releaseMultiSource string
	//go:embed extend_multi.lua
	extendMultiSource string
	//go:embed clock.lua
	clockSource string
	//go:embed rw.lua
	rwSource string
	//go:embed rw_base.lua
	rwBaseSource string
	//go:embed read_acquire_head.lua
	readAcquireHeadSource string
	//go:embed read_release_head.lua
	readReleaseHeadSource string
	//go:embed read_acquire.lua
	readAcquireSource string
	//go:embed read_extend.lua
	readExtendSource string
	//go:embed read_release.lua
	readReleaseSource string
	//go:embed write_acquire.lua
	writeAcquireSource string
	//go:embed semaphore.lua
	semaphoreSource string
	//go:embed sem_acquire.lua
	semAcquireSource string
	//go:embed sem_release.lua
	semReleaseSource string
	//go:embed sem_extend.lua
	semExtendSource string
)

// Release deletes KEYS[1] if it holds ARGV[1] and, when the waiters'
// queue KEYS[2] exists, announces "ARGV[1]|next" on ARGV[2], next popped
// from it (hands the lock over to it, see release.lua); it returns the
// node's run id when the key was absent (0 when ARGV[2] is ""), "taken:"
// and the run id when it held something else (-1 when ARGV[2] is ""), else
// 1 + 2 × the clients the announcement reached,
// + 1 when it named a waiter.
var Release = &Script{Source: releaseHeadSource + storedSource + grantedSource + announceSource + releaseSource, Hash: "c3feafbb71ed0efca1cbbd72fc9dcf2b749647ee"}

// Extend sets KEYS[1]'s expiry to ARGV[2] ms if it holds ARGV[1]; it returns 1 or 0.
var Extend = &Script{Source: extendSource, Hash: "8e4345d5f0f23e9867497e8b17cef391f08236fa"}

// ExtendMany is Extend for several keys in one call: ARGV holds a token
// and a TTL per key, and it returns 1, 0, or -1 (GET failed) per key.
var ExtendMany = &Script{Source: extendManySource, Hash: "8e716bdb6b0eab91639bef8653ec567be4365830"}

// AcquirePlain sets KEYS[1] to ARGV[1] with ttl ARGV[2] ms if absent; it
// returns the node's time in Unix ms when ARGV[3] is "1" (1 when not, or
// when the user may not run TIME)
// when KEYS[1] holds ARGV[1] (now, or already), the value holding it otherwise, 0 when a reentrant lock holds
// it, and an error reply when KEYS[1] holds something that is not a lock.
var AcquirePlain = &Script{Source: acquirePlainSource + storedSource + grantedSource + acquirePlainTailSource, Hash: "c4fc9a221b8e85722dff9dd983c50b19140bb6b5"}

// Acquire sets KEYS[1] to ARGV[1] with ttl ARGV[2] ms if absent, unless
// the node has been up less than ARGV[3] seconds; it returns
// {status, n[, holder]}: {1, counter} granted, {0, counter, holder} held,
// {-1, uptime} refused, where counter is the fencing counter KEYS[2] ("0"
// without it) and holder the value holding KEYS[1]; an error reply when
// KEYS[1] holds something that is not a lock.
var Acquire = &Script{Source: guardSource + storedSource + acquireSource, Hash: "9f80783c6267f40e982a8c6867ab95b7751a0329"}

// AcquireReentrant takes or re-takes the reentrant lock KEYS[1] for owner
// ARGV[1] with ttl ARGV[2] ms (ARGV[3] "1": only if it still exists),
// unless the node has been up less than ARGV[4] seconds; it returns
// {holds, counter} (holds 0: held by another) or {-1, uptime}; an error
// reply when KEYS[1] holds something that is not a lock.
var AcquireReentrant = &Script{Source: guardSource + storedSource + acquireReentrantSource, Hash: "ec5150335538c9f182787b74500aff19c9199643"}

// ReleaseReentrant drops one hold (ARGV[2] "0"), all ("1") or the hold of a
// failed acquisition ("2", deleting the key at zero) of owner
// ARGV[1] on KEYS[1], publishing ARGV[4] on ARGV[3] when the key goes; it
// returns the node's run id when the key was absent (for ARGV[2] "1"; 0
// otherwise), -1 when it held something else, else 1 + 2 × the clients the
// announcement reached (+ 1 when it named a waiter).
var ReleaseReentrant = &Script{Source: storedSource + announceSource + releaseReentrantSource, Hash: "1ded2b3dd28b5c054b07d63772cd9fcfc9acfff6"}

// ExtendReentrant sets KEYS[1]'s expiry to ARGV[2] ms if owner ARGV[1]
// holds it; it returns 1 or 0.
var ExtendReentrant = &Script{Source: extendReentrantSource, Hash: "15552a83028fb871de4bb22bce74dd72eab32405"}

// Fence raises the fencing counter KEYS[2] to ARGV[2] and returns 1 if the
// lock KEYS[1] holds token or owner ARGV[1] (ARGV[3] "1": reentrant), else 0.
var Fence = &Script{Source: storedSource + fenceSource, Hash: "febd2ca99db0b6cdfa018f35cdcaa3ecbaf271f7"}

// SetFenced sets KEYS[1] to ARGV[1] and KEYS[2] to the fencing token ARGV[2]
// unless KEYS[2] holds a higher token; it returns 1 when written, 0 when not.
var SetFenced = &Script{Source: setFencedSource, Hash: "a2315a39517a1ff2290defd8b18dfc203d2772aa"}

// Inspect reads the lock or semaphore KEYS[1], the fencing counter KEYS[2]
// and the permit count KEYS[3], changing nothing; it returns {kind, pttl,
// holder, holds, counter} (kind "none", "string" or "hash"), followed for a
// semaphore (kind "zset") by its permit count and a token and remaining ms
// per live permit, or an error reply when KEYS[1] holds something that is
// neither.
var Inspect = &Script{Source: storedSource + clockSource + inspectSource, Hash: "2028d8afc493aa90244da412db04f08fe2588993"}

// ForceRelease deletes the lock KEYS[1] whoever holds it and announces the
// release on ARGV[1] (a reentrant lock's with the id ARGV[2]), popping the
// next waiter from KEYS[2]; it returns {0, "", "none"} when the key was
// absent, else {1 + 2 × the clients that heard it (+ 1 when it named a
// waiter), holder, kind}, or an error reply, deleting nothing, when KEYS[1]
// holds something that is not a lock. It never touches the fencing counter.
var ForceRelease = &Script{Source: storedSource + announceSource + forceReleaseSource, Hash: "21174c49f9cfa05c6405c13ccfe38c2626671540"}

// AcquireMulti sets every key of KEYS to ARGV[1] with ttl ARGV[2] ms if
// each is absent or holds ARGV[1] already, else sets none, unless the node
// has been up less than ARGV[3] seconds; it returns 1, the holder of a
// held key, or 0 as AcquirePlain does, and {-1, uptime} as Acquire does.
var AcquireMulti = &Script{Source: guardSource + storedSource + acquireMultiSource, Hash: "7b5af62d4e6954fec22af54127ebf9dcc99645b4"}

// ReleaseMulti deletes the keys of KEYS that hold ARGV[1], announcing each
// on ARGV[2] followed by its name (ARGV[2] "": no announcement); it returns
// as Release does, never naming a waiter.
var ReleaseMulti = &Script{Source: storedSource + releaseMultiSource, Hash: "2dc6d8a7fa825cf614a075dc1133a186ec05c14a"}

// ExtendMulti sets every key of KEYS's expiry to ARGV[2] ms if each holds
// ARGV[1]; it returns 1, or 0 having changed nothing.
var ExtendMulti = &Script{Source: storedSource + extendMultiSource, Hash: "6d47e46e509fb2067afc4ce1f1270d2c0cadef57"}

// SemAcquire drops the expired permits of the semaphore KEYS[1] (a sorted
// set of tokens scored by expiry, node time in ms) and gives ARGV[1] one
// for ARGV[2] ms if fewer than ARGV[3] are held or it holds one already,
// unless the node has been up less than ARGV[4] seconds; KEYS[2] keeps the
// permit count. It returns {1, holders} granted, {0, holders} full,
// {-1, uptime} recovering, {-2, permits} live holders have another count;
// an error reply when KEYS[1] is not a semaphore.
var SemAcquire = &Script{Source: guardSource + clockSource + semaphoreSource + semAcquireSource, Hash: "694951300c522c0fe8df80103a4c17972a445d22"}

// SemRelease drops ARGV[1]'s permit of the semaphore KEYS[1] and announces
// it on ARGV[2], naming the next waiter popped from KEYS[3]; it returns the
// node's run id when no live permit was held (0 when ARGV[2] is ""), else
// 1 + 2 × the clients the announcement reached (+ 1 when it named a
// waiter); an error reply when KEYS[1] is not a semaphore.
var SemRelease = &Script{Source: storedSource + announceSource + clockSource + semaphoreSource + semReleaseSource, Hash: "a803c8fd7af9c26513575b18cc00a29b8bb28625"}

// SemExtend re-arms ARGV[1]'s live permit of the semaphore KEYS[1] for
// ARGV[2] ms; it returns 1 or 0, or an error reply when KEYS[1] is not a
// semaphore.
var SemExtend = &Script{Source: clockSource + semaphoreSource + semExtendSource, Hash: "279e35e416a177fc2866114c29ee7f1d0301d1b6"}

// ReadAcquire takes a read hold of a reader-writer lock (read_acquire.lua).
var ReadAcquire = &Script{Source: clockSource + rwBaseSource + readAcquireHeadSource + guardSource + storedSource + rwSource + readAcquireSource, Hash: "690c185f93775a05c7e1e8f1246ef83576ea5087"}

// ReadExtend re-arms a read hold (read_extend.lua).
var ReadExtend = &Script{Source: storedSource + clockSource + rwBaseSource + rwSource + readExtendSource, Hash: "74e959de52d13ebb831223b79daaeda9e53ffda3"}

// ReadRelease drops a read hold (read_release.lua).
var ReadRelease = &Script{Source: clockSource + announceSource + rwBaseSource + readReleaseHeadSource + storedSource + rwSource + readReleaseSource, Hash: "6a5b4ea6ba8b057306f8f866a440b244a5bb415a"}

// WriteAcquire takes a reader-writer lock's write lock (write_acquire.lua).
var WriteAcquire = &Script{Source: guardSource + storedSource + grantedSource + clockSource + rwBaseSource + rwSource + writeAcquireSource, Hash: "2bc38129c229526fb051e707e9d8b5e9edd24b73"}

// All is every script a lock node runs, to load into its cache at once.
var All = []*Script{AcquirePlain, Release, Extend, ExtendMany, AcquireReentrant, ReleaseReentrant, ExtendReentrant, Acquire, Fence, Inspect, ForceRelease,
	AcquireMulti, ReleaseMulti, ExtendMulti, SemAcquire, SemRelease, SemExtend,
	ReadAcquire, ReadExtend, ReadRelease, WriteAcquire}
