# odl_worker --tensorboard: protobuf-c sources of the TensorBoard Event/Summary subsets, generated at
# build time (cmake/OdlProto.cmake) into ${PROJECT_BINARY_DIR}/proto and built into odl_worker.
if(ODL_HAVE_PROTOBUFC AND TARGET odl_worker)
  odl_protobuf_c(ODL_TB_PROTO_SRCS proto/tensorboard/summary.proto proto/tensorboard/event.proto)
  target_sources(odl_worker PRIVATE ${ODL_TB_PROTO_SRCS})
  target_include_directories(odl_worker PRIVATE ${PROJECT_BINARY_DIR})
endif()
