# YOLOv5 inference benchmark (bench/yolov5_bench.c): forward latency at batch 1, throughput at batch 32,
# end to end on bus.jpg, beside PyTorch measured in the same call (--torch OUT.json of
# ../shared/bench/torch_baselines.py; without it no PyTorch figure and no ratio).
# Included by bench/CMakeLists.txt: include(${CMAKE_CURRENT_SOURCE_DIR}/yolov5.cmake)
# Run: ./bench/yolov5_bench --weights yolov5n.h5 (weights from tools/convert_yolov5.py; the test fixture
# yolov5_convert leaves them at the top of the build folder).
add_executable(yolov5_bench ${CMAKE_CURRENT_LIST_DIR}/yolov5_bench.c ${PROJECT_SOURCE_DIR}/worker/cli_flags.c)
target_link_libraries(yolov5_bench PRIVATE odl ${ODL_PRIVATE_LIBS})
target_include_directories(yolov5_bench PRIVATE ${PROJECT_SOURCE_DIR})
