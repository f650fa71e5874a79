// The init process of one real pod (pid 1 of the pod's own pid namespace, inside its own
// network, UTS, mount and IPC namespaces). The pod runner starts it through the simulator's
// binary (`gpu-guardian-sim __gg_pod_init FD`) and drives it over FD, a SOCK_SEQPACKET
// socket carrying one JSON object per message:
//
//   runner -> init
//     {"op":"setup","hostname":H}                      hostname, private /proc and /run
//     {"op":"start","name":C,"argv":[..],"env":[..],"cwd":D,"uid":U,"gid":G,
//      "mounts":[{"src":S,"dst":D,"ro":B}],"log":PATH}  runs container C
//     {"op":"signal","name":C,"sig":N}                  SIGKILL goes to C's process group
//     {"op":"exec","id":I,"name":C,"argv":[..],"timeout_ms":T}  an exec probe in C (its mounts,
//                                                      env and identity)
//   init -> runner
//     {"ev":"ready"} | {"ev":"error","message":M}
//     {"ev":"started","name":C,"pid":P} | {"ev":"start_failed","name":C,"message":M}
//     {"ev":"exit","name":C,"code":X,"signal":S}
//     {"ev":"exec","id":I,"code":X}                     X = -1: timed out
//
// Container stdout/stderr go to PATH in the kubelet's CRI log format, one line per record:
// "<RFC 3339 nano UTC> stdout|stderr F|P <text>". The init exits when the runner's end of
// FD closes; with PR_SET_PDEATHSIG it is also killed when the simulator dies, and the kernel
// then kills every process of the pod's pid namespace.
#pragma once

namespace gg::sim {

inline constexpr char kPodInitArg[] = "__gg_pod_init";

// Runs the init loop on `ctl_fd`; returns the process exit code.
int PodInitMain(int ctl_fd);

}  // namespace gg::sim
