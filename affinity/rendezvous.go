package affinity

// Rendezvous returns the index in servers of the server that key goes to by
// rendezvous (highest random weight) hashing, or -1 when servers is empty:
// each server scores hash(key, server) and the highest wins. Every proxy
// with the same set of servers picks the same one, in any order, without
// talking to the others; removing a server moves only the keys it had, and
// adding one moves only the ~1/n of keys it now wins.
//
// A server's score is murmur3's 64-bit finalizer over the FNV-1a 64 hash
// of key, a zero byte and server: fixed and unseeded so that every process,
// build and version agrees (changing it would send creations elsewhere
// across a fleet running mixed versions), and simple to reproduce in
// another language. FNV-1a alone mixes its last bytes poorly, and servers
// often differ only there (10.0.0.1:80, 10.0.0.2:80); the finalizer
// spreads them. It does not allocate.
func Rendezvous(key string, servers []string) int {
	keyHash := fnv1a(fnvOffset, key)
	best, bestScore := -1, uint64(0)
	for i, server := range servers {
		score := rendezvousScore(keyHash, server)
		// Ties (equal 64-bit scores, or a server listed twice) go to the
		// smaller server name, so the order of servers never matters.
		if best < 0 || score > bestScore || score == bestScore && server < servers[best] {
			best, bestScore = i, score
		}
	}
	return best
}

// rendezvousScore is server's weight for the key whose FNV-1a hash is
// keyHash. A zero byte separates key and server, so ("ab", "c") and
// ("a", "bc") hash differently.
func rendezvousScore(keyHash uint64, server string) uint64 {
	return fmix64(fnv1a((keyHash^0)*fnvPrime, server))
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnv1a(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// fmix64 is murmur3's 64-bit finalizer: every input bit flips each output
// bit with probability about one half.
func fmix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
