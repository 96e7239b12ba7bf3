-- Example stack module: the CUDA toolkit. A site copies it into its module tree and sets the root.
--   HPCBENCH_CUDA_ROOT  toolkit prefix (bin/nvcc, lib64/). Default: /usr/local/cuda-<version>.
help([[CUDA toolkit (example modulefile shipped with hpcbench; set HPCBENCH_CUDA_ROOT)]])
whatis("Name: cuda")
whatis("Version: " .. myModuleVersion())

local root = os.getenv("HPCBENCH_CUDA_ROOT")
if root == nil or root == "" then
    root = "/usr/local/cuda-" .. myModuleVersion()
end
if mode() == "load" and not isDir(pathJoin(root, "lib64")) then
    LmodError("cuda/", myModuleVersion(), ": no lib64/ under ", root,
              "; set HPCBENCH_CUDA_ROOT to the CUDA toolkit prefix")
end

family("cuda")
setenv("CUDA_HOME", root)
setenv("CUDA_PATH", root)
prepend_path("PATH", pathJoin(root, "bin"))
prepend_path("LD_LIBRARY_PATH", pathJoin(root, "lib64"))
