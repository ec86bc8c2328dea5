#define BOOST_TEST_MODULE net_transport
#include <boost/test/unit_test.hpp>
