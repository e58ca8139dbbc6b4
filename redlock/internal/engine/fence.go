package engine

// MaxFence bounds fencing tokens: the scripts compare them as Lua numbers,
// exact up to 2^53. At a million acquisitions a second it lasts 285 years.
const MaxFence = 1 << 53
