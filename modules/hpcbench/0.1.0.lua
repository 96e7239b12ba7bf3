-- hpcbench 0.1.0: puts the `hpcbench` command on PATH.
--
-- What to set (no need to edit this file):
--   HPCBENCH_PREFIX  the venv or install prefix that holds bin/hpcbench (python -m venv PREFIX;
--                    PREFIX/bin/pip install hpcbench). Default: the prefix this file was installed
--                    into (PREFIX/share/hpcbench/modules, where pip puts it), else .venv in the
--                    checkout that holds this modules/ folder (what scripts/venv.sh makes).
-- Loaded from a source checkout, the checkout itself goes first on PYTHONPATH, so that jobs run
-- the code in front of you rather than whatever copy the venv was installed from.
--
--   module use PREFIX/share/hpcbench/modules && module load hpcbench     (pip install / a wheel)
--   module use /path/to/hpcbench/modules && module load hpcbench         (a checkout)
help([[hpcbench: plan, run and explain distributed training scaling on Slurm.
Set HPCBENCH_PREFIX to the venv or install prefix holding bin/hpcbench.]])
whatis("Name: hpcbench")
whatis("Version: " .. myModuleVersion())
whatis("Description: distributed deep-learning scaling benchmarks for Slurm clusters")

local here = myFileName():match("^(.*)/modules/hpcbench/[^/]+%.lua$")
local installed = here and here:match("^(.*)/share/hpcbench$")  -- pip's copy, under its prefix
local checkout = (not installed) and here or nil
local prefix = os.getenv("HPCBENCH_PREFIX")
if prefix == nil or prefix == "" then
    prefix = installed or (checkout and pathJoin(checkout, ".venv"))
end
if mode() == "load" and (prefix == nil or not isFile(pathJoin(prefix, "bin", "hpcbench"))) then
    LmodError("hpcbench: no bin/hpcbench under ", tostring(prefix),
              "; set HPCBENCH_PREFIX to the venv or prefix where hpcbench is installed")
end

prepend_path("PATH", pathJoin(prefix, "bin"))
setenv("HPCBENCH_PREFIX", prefix)
if checkout and isFile(pathJoin(checkout, "hpcbench", "__init__.py")) then
    prepend_path("PYTHONPATH", checkout)
    setenv("HPCBENCH_HOME", checkout)
end
family("hpcbench")
