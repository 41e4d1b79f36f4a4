"""How the ranks share the work, behind one seam (`backend.Backend`): Horovod
(`horovod_backend`), TensorFlow's MultiWorkerMirroredStrategy and ParameterServerStrategy
(`tf_strategies`), the hosts' TensorFlow clusters (`cluster_spec`, pure Python) and one host's
parameter-server tasks (`parameter_server_host`)."""
