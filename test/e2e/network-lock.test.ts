// The files that hold the network's host lock (host-lock.ts): each makes or
// reads host-wide network state (namespaces, bridges, iptables, a cluster of
// its own with the pod network or kube-proxy, a firewall rule), so no two of
// them can run at once. As files of their own, each took a jest worker and
// held it idle while it waited for the lock; here they run one after another
// in one worker, beside every other file, and the order of the run starts
// them early (sequencer.mjs). Each block still takes its locks for its own
// length, so one block's failure frees the lock for the next.
//
// One of them alone: `jest test/e2e/network-lock.test.ts -t '<its describe name>'`.
import './network-lock/pod-network.js'
import './network-lock/two-clusters.js'
import './network-lock/cluster-services.js'
import './network-lock/relay.js'
import './network-lock/relay-outage.js'
import './network-lock/sandbox-pool.js'
import './network-lock/doctor.js'
import './network-lock/demo-tui.js'
