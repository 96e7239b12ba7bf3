-- Example stack module: NCCL, and nccl-tests when the site built them.
--   HPCBENCH_NCCL_ROOT        NCCL prefix (lib/libnccl.so). Default: /opt/nccl/<version>.
--   HPCBENCH_NCCL_TESTS_DIR   folder with all_reduce_perf etc. (optional; sbatch/nccl_2node.sh uses it).
help([[NCCL (example modulefile shipped with hpcbench; set HPCBENCH_NCCL_ROOT)]])
whatis("Name: nccl")
whatis("Version: " .. myModuleVersion())

local root = os.getenv("HPCBENCH_NCCL_ROOT")
if root == nil or root == "" then
    root = pathJoin("/opt/nccl", myModuleVersion())
end
if mode() == "load" and not isDir(pathJoin(root, "lib")) then
    LmodError("nccl/", myModuleVersion(), ": no lib/ under ", root,
              "; set HPCBENCH_NCCL_ROOT to the NCCL prefix")
end

prereq("cuda")
setenv("NCCL_HOME", root)
prepend_path("LD_LIBRARY_PATH", pathJoin(root, "lib"))
local tests = os.getenv("HPCBENCH_NCCL_TESTS_DIR")
if tests and tests ~= "" then
    setenv("NCCL_TESTS_DIR", tests)
    prepend_path("PATH", tests)
end
