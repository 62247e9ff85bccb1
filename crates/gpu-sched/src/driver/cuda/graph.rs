//! Graphs built through the explicit graph API (DESIGN "Graphs without capture by hand"): a graphed scope's
//! recorded operations become kernel, memcpy and memset nodes of a
//! `CUgraph`, each added after the nodes it follows, then instantiated. The
//! `CUgraph` and its nodes are kept beside the executable graph, so that a
//! kernel node's arguments can be set in place
//! (`cuGraphExecKernelNodeSetParams`).

use super::args::{pack_args, ArgSlot};
use super::{CudaDriver, MAX_KERNEL_ARGS};
use crate::driver::{ChildNode, GraphSpec, KernelNode, NodeOp, RawGraph};
use crate::error::{Error, Result};
use cudarc::driver::sys;
use std::ffi::c_void;
use std::ptr;

/// A kernel node's parameters over `slots` and `params` (which must
/// outlive the call that takes them).
fn kernel_params(
    k: &KernelNode,
    slots: &mut [ArgSlot; MAX_KERNEL_ARGS],
    params: &mut [*mut c_void; MAX_KERNEL_ARGS],
) -> Result<sys::CUDA_KERNEL_NODE_PARAMS> {
    pack_args(&k.args, slots, params)?;
    let ([gx, gy, gz], [bx, by, bz]) = (k.cfg.grid, k.cfg.block);
    Ok(sys::CUDA_KERNEL_NODE_PARAMS {
        func: k.handle as usize as sys::CUfunction,
        gridDimX: gx,
        gridDimY: gy,
        gridDimZ: gz,
        blockDimX: bx,
        blockDimY: by,
        blockDimZ: bz,
        sharedMemBytes: k.cfg.shared_mem_bytes,
        kernelParams: params.as_mut_ptr(),
        extra: ptr::null_mut(),
        kern: ptr::null_mut(),
        ctx: ptr::null_mut(),
    })
}

impl CudaDriver {
    /// `Driver::graph_build`. The caller entered the context.
    ///
    /// # Safety
    ///
    /// As `Driver::graph_build`.
    pub(super) unsafe fn build_graph(&self, spec: &GraphSpec<'_>) -> Result<RawGraph> {
        let mut graph: sys::CUgraph = ptr::null_mut();
        // SAFETY: the context is current; `graph` is a valid out-pointer.
        self.call("cuGraphCreate", || unsafe {
            sys::cuGraphCreate(&mut graph, 0)
        })?;
        let mut nodes: Vec<sys::CUgraphNode> = vec![ptr::null_mut(); spec.ops.len()];
        // SAFETY: `graph` was created above; the nodes are added in an
        // order where each one's dependencies exist (`topo`).
        let added = unsafe { self.add_nodes(graph, spec, &mut nodes) };
        let mut exec: sys::CUgraphExec = ptr::null_mut();
        let instantiated = added.and_then(|()| {
            // SAFETY: `graph` is complete; `exec` is a valid out-pointer.
            self.call("cuGraphInstantiateWithFlags", || unsafe {
                sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)
            })
        });
        if let Err(e) = instantiated {
            // SAFETY: `graph` is ours, not instantiated, not used after.
            let _ = unsafe { sys::cuGraphDestroy(graph) };
            return Err(e);
        }
        let key = exec as usize as u64;
        self.built.lock().insert(
            key,
            (
                graph as usize as u64,
                nodes.iter().map(|&n| n as usize as u64).collect(),
            ),
        );
        Ok(RawGraph(key))
    }

    /// Adds `spec`'s nodes to `graph`, node `i` into `nodes[i]`.
    ///
    /// # Safety
    ///
    /// `graph` is a graph of this context; `spec` as `Driver::graph_build`.
    unsafe fn add_nodes(
        &self,
        graph: sys::CUgraph,
        spec: &GraphSpec<'_>,
        nodes: &mut [sys::CUgraphNode],
    ) -> Result<()> {
        let ctx = self.ctx as usize as sys::CUcontext;
        let mut deps: Vec<sys::CUgraphNode> = Vec::with_capacity(8);
        for &i in spec.topo {
            let i = i as usize;
            deps.clear();
            deps.extend(spec.deps[i].iter().map(|&d| nodes[d as usize]));
            let mut node: sys::CUgraphNode = ptr::null_mut();
            match &spec.ops[i] {
                NodeOp::Kernel(k) => {
                    let mut slots = [ArgSlot::ZERO; MAX_KERNEL_ARGS];
                    let mut params = [ptr::null_mut::<c_void>(); MAX_KERNEL_ARGS];
                    let p = kernel_params(k, &mut slots, &mut params)?;
                    // SAFETY: `p` points into `slots` and `params`, alive
                    // for the call (the driver copies the values); `deps`
                    // are nodes of `graph` added before; the arguments
                    // match the kernel (the caller's contract).
                    self.call("cuGraphAddKernelNode", || unsafe {
                        sys::cuGraphAddKernelNode_v2(
                            &mut node,
                            graph,
                            deps.as_ptr(),
                            deps.len(),
                            &p,
                        )
                    })?;
                }
                &NodeOp::Copy { dst, src, bytes } => {
                    // Every field set (all-zero is not a valid value of
                    // its memory-type enums).
                    let device = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
                    let c = sys::CUDA_MEMCPY3D {
                        srcXInBytes: 0,
                        srcY: 0,
                        srcZ: 0,
                        srcLOD: 0,
                        srcMemoryType: device,
                        srcHost: ptr::null(),
                        srcDevice: src,
                        srcArray: ptr::null_mut(),
                        reserved0: ptr::null_mut(),
                        srcPitch: 0,
                        srcHeight: 0,
                        dstXInBytes: 0,
                        dstY: 0,
                        dstZ: 0,
                        dstLOD: 0,
                        dstMemoryType: device,
                        dstHost: ptr::null_mut(),
                        dstDevice: dst,
                        dstArray: ptr::null_mut(),
                        reserved1: ptr::null_mut(),
                        dstPitch: 0,
                        dstHeight: 0,
                        WidthInBytes: bytes,
                        Height: 1,
                        Depth: 1,
                    };
                    // SAFETY: `c` describes a copy between two live device
                    // ranges of this context (the caller's contract).
                    self.call("cuGraphAddMemcpyNode", || unsafe {
                        sys::cuGraphAddMemcpyNode(
                            &mut node,
                            graph,
                            deps.as_ptr(),
                            deps.len(),
                            &c,
                            ctx,
                        )
                    })?;
                }
                &NodeOp::Memset { dst, value, count } => {
                    let m = sys::CUDA_MEMSET_NODE_PARAMS {
                        dst,
                        pitch: 0,
                        value,
                        elementSize: 4,
                        width: count,
                        height: 1,
                    };
                    // SAFETY: `m` describes `count` words of live device
                    // memory of this context (the caller's contract).
                    self.call("cuGraphAddMemsetNode", || unsafe {
                        sys::cuGraphAddMemsetNode(
                            &mut node,
                            graph,
                            deps.as_ptr(),
                            deps.len(),
                            &m,
                            ctx,
                        )
                    })?;
                }
                NodeOp::Child(c) => {
                    // SAFETY: `c.graph` is a live graph of this context
                    // (`end_capture_child`), which the call clones into
                    // the node; `deps` are nodes of `graph` added before.
                    self.call("cuGraphAddChildGraphNode", || unsafe {
                        sys::cuGraphAddChildGraphNode(
                            &mut node,
                            graph,
                            deps.as_ptr(),
                            deps.len(),
                            c.graph.raw as usize as sys::CUgraph,
                        )
                    })?;
                }
            }
            nodes[i] = node;
        }
        Ok(())
    }

    /// `Driver::graph_set_kernel`.
    ///
    /// # Safety
    ///
    /// As `Driver::graph_set_kernel`.
    pub(super) unsafe fn set_kernel(&self, g: RawGraph, i: usize, k: &KernelNode) -> Result<()> {
        let node = self.built_node(g, i)?;
        let mut slots = [ArgSlot::ZERO; MAX_KERNEL_ARGS];
        let mut params = [ptr::null_mut::<c_void>(); MAX_KERNEL_ARGS];
        let p = kernel_params(k, &mut slots, &mut params)?;
        // SAFETY: `node` is kernel node `i` of the graph `g` was
        // instantiated from (kept in `built`), of the same kernel and
        // configuration (the caller's contract); `p` points into locals
        // alive for the call.
        self.call("cuGraphExecKernelNodeSetParams", || unsafe {
            sys::cuGraphExecKernelNodeSetParams_v2(
                g.0 as usize as sys::CUgraphExec,
                node as usize as sys::CUgraphNode,
                &p,
            )
        })
    }

    /// Node `i` of the graph `g` was built from (`build_graph`).
    fn built_node(&self, g: RawGraph, i: usize) -> Result<u64> {
        self.built
            .lock()
            .get(&g.0)
            .and_then(|(_, nodes)| nodes.get(i).copied())
            .ok_or(Error::Driver {
                code: 400,
                name: "CUDA_ERROR_INVALID_HANDLE".into(),
                during: "setting a node of a graph that was not built through the explicit API",
            })
    }

    /// `Driver::graph_set_child`.
    ///
    /// # Safety
    ///
    /// As `Driver::graph_set_child`.
    pub(super) unsafe fn set_child(&self, g: RawGraph, i: usize, c: &ChildNode) -> Result<()> {
        let node = self.built_node(g, i)?;
        // SAFETY: `node` is child node `i` of the graph `g` was
        // instantiated from (kept in `built`); `c.graph` is a live graph
        // of this context, which the driver reads during the call (it
        // refuses one of another topology, changing nothing).
        self.call("cuGraphExecChildGraphNodeSetParams", || unsafe {
            sys::cuGraphExecChildGraphNodeSetParams(
                g.0 as usize as sys::CUgraphExec,
                node as usize as sys::CUgraphNode,
                c.graph.raw as usize as sys::CUgraph,
            )
        })
    }

    /// Destroys the `CUgraph` kept for an executable graph built here, if
    /// it was (the executable graph itself is the caller's to destroy).
    pub(super) fn forget_built(&self, g: RawGraph) -> Result<()> {
        let Some((graph, _)) = self.built.lock().remove(&g.0) else {
            return Ok(());
        };
        // SAFETY: the graph was created by `build_graph` and only its
        // executable graph, which does not depend on it, uses it.
        self.call("cuGraphDestroy", || unsafe {
            sys::cuGraphDestroy(graph as usize as sys::CUgraph)
        })
    }
}
