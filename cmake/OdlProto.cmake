# odl_protobuf_c(<out_var> <proto>...): generates <name>.pb-c.c/.pb-c.h for each .proto (paths relative
# to the source tree) at build time into ${PROJECT_BINARY_DIR}/proto, and sets <out_var> to the
# generated .c files. Include them as "proto/<name>.pb-c.h" with ${PROJECT_BINARY_DIR} on the include
# path. Generated sources are never committed.
function(odl_protobuf_c out_var)
  set(_srcs "")
  file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/proto)
  foreach(_proto ${ARGN})
    get_filename_component(_abs ${_proto} ABSOLUTE BASE_DIR ${PROJECT_SOURCE_DIR})
    get_filename_component(_dir ${_abs} DIRECTORY)
    get_filename_component(_name ${_abs} NAME_WE)
    set(_c ${PROJECT_BINARY_DIR}/proto/${_name}.pb-c.c)
    set(_h ${PROJECT_BINARY_DIR}/proto/${_name}.pb-c.h)
    add_custom_command(OUTPUT ${_c} ${_h}
      COMMAND ${PROTOC_C} --proto_path=${_dir} --c_out=${PROJECT_BINARY_DIR}/proto ${_abs}
      DEPENDS ${_abs} COMMENT "protoc-c ${_name}.proto" VERBATIM)
    list(APPEND _srcs ${_c})
  endforeach()
  set(${out_var} ${_srcs} PARENT_SCOPE)
endfunction()
