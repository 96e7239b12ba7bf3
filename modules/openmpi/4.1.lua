-- Example stack module: OpenMPI. A site copies it into its module tree and sets the root.
--   HPCBENCH_OPENMPI_ROOT  install prefix (bin/mpirun, lib/). Default: /opt/openmpi/<version>.
-- Debian's packaged OpenMPI lives under /usr: HPCBENCH_OPENMPI_ROOT=/usr.
help([[OpenMPI (example modulefile shipped with hpcbench; set HPCBENCH_OPENMPI_ROOT)]])
whatis("Name: openmpi")
whatis("Version: " .. myModuleVersion())

local root = os.getenv("HPCBENCH_OPENMPI_ROOT")
if root == nil or root == "" then
    root = pathJoin("/opt/openmpi", myModuleVersion())
end
if mode() == "load" and not isFile(pathJoin(root, "bin", "mpirun")) then
    LmodError("openmpi/", myModuleVersion(), ": no bin/mpirun under ", root,
              "; set HPCBENCH_OPENMPI_ROOT to the OpenMPI install prefix")
end

family("mpi")
setenv("MPI_HOME", root)
setenv("OMPI_MCA_pml", os.getenv("HPCBENCH_OMPI_PML") or "ucx")  -- UCX drives InfiniBand; "ob1" on TCP-only nodes
if root ~= "/usr" then
    prepend_path("PATH", pathJoin(root, "bin"))
    prepend_path("LD_LIBRARY_PATH", pathJoin(root, "lib"))
    prepend_path("MANPATH", pathJoin(root, "share", "man"))
end
