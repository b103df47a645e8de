/**
 * The runtime's door for `up`: what this host allows pods to have, detected
 * before the node registers (the sandbox, cgroups, the pod network, the image
 * map), so a wall the node cannot build is said up front; `doctor` runs the
 * same detection. The provider itself is built through the other door,
 * process-provider.ts.
 */
export {detectRootLayer, detectSandbox} from './sandbox/detect.js'
export type {SandboxWalls} from './sandbox/spec.js'
export {detectCgroups} from './cgroups/detect.js'
export {clusterDnsFor, detectPodNetwork, isLoopbackServer, podNetworkFor, podNetworkSummary} from './network/node-network.js'
export {DefaultCniPath, RequiredPlugins} from './network/detect.js'
export {ImageMap} from './images/image-map.js'
export {defaultImageMap} from './images/default-images.js'
export {nodeWalls, wallNames, withFsWalls} from './sandbox/walls.js'
export {sandboxWalls} from './sandbox/walls-fs.js'
